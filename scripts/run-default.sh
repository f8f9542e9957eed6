#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Tangram, and runs the main job on its embedded
# default: `tangram bench` generates (once, cached) a Q8_0 model with the attention shape of
# Qwen3-4B, takes the real per-head profile of Qwen3-4B from data/profiles, and runs the
# service workload (many more conversations than the KV memory holds under full KV, arriving
# over time, idle for seeded think times between turns) under the full, uniform, dynamic and
# tangram KV policies at 25% retention on the same KV memory, dynamic also at 15% so that its two
# runs bracket the others' effective retention ("x dynamic at equal retention" interpolates
# between them; --dynamic-bracket). It runs twice: with no tier below
# the KV pool (an evicted conversation's next turn is recomputed) and with a host-memory tier
# (--kv-host-memory: it is restored), the reports going to ./tangram-bench/no-tier and
# ./tangram-bench/host-tier. Extra arguments go to both runs (e.g. --quick for a run of a few
# minutes); not -o, which this script sets.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target tangram
SECONDS=0
./build/release/tangram bench -o tangram-bench/no-tier "$@"
no_tier_s=${SECONDS}
SECONDS=0
./build/release/tangram bench --kv-host-memory 1GiB -o tangram-bench/host-tier "$@"
host_tier_s=${SECONDS}
# The two verdicts together: tangram against full and against dynamic, at the same ratio and at
# equal effective retention, without and with the tier (each report.md ends with its verdict).
for run in no-tier host-tier; do
  echo "${run}: $(grep -m1 '^tangram at ratio' "tangram-bench/${run}/report.md" || echo 'no verdict (tangram or full not run)')"
done
echo "run time: no tier ${no_tier_s} s, host-memory tier ${host_tier_s} s"
