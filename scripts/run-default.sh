#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Tangram, and runs the main job on its embedded
# default: `tangram bench` generates (once, cached) a Q8_0 model with the attention shape of
# Qwen3-4B, takes the real per-head profile of Qwen3-4B from ../shared/profiles, and runs the
# SCBench-like multi-turn workload under the full, uniform, dynamic and tangram KV policies at
# 25% retention on the same KV memory, writing the report to ./tangram-bench. Extra arguments
# go to `tangram bench` (e.g. --quick for a run of about two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target tangram
./build/release/tangram bench "$@"
