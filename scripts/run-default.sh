#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Tangram, and runs the main job on its embedded
# default: `tangram bench-model` generates (once, cached) models with the attention shape of
# Qwen3-4B in F32, Q8_0 and Q4_K, and reports prefill and decode speed against the machine's
# measured memory bandwidth, beside llama.cpp on the same files. Extra arguments go to
# bench-model (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/oracle-setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target tangram
./build/release/tangram bench-model "$@"
