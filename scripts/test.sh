#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Tangram (release, and a sanitizer build of the
# suites that parse untrusted input), and runs every test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/oracle-setup.sh

jobs=$(nproc)
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

# Address and undefined-behaviour sanitizers on the suites that read untrusted bytes.
cmake --preset debug
cmake --build --preset debug -j "$jobs" --target test_gguf test_tokenizer
ctest --preset debug -j "$jobs" -R '^(Gguf|Malformed|Tokenizer)'
