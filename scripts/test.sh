#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, checks the formatting, builds Tangram, and runs every test
# suite through CTest: first the suites that parse untrusted input or manage KV memory under AddressSanitizer +
# UBSan (debug preset) and the server under them against the hostile end-to-end suites, then a
# bounded fuzzing run of the parsers (fuzz preset), then the whole
# suite on the optimised build (release preset).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh --tests
./scripts/oracle-setup.sh
./scripts/e2e-setup.sh
./scripts/check-format.sh

jobs=$(nproc)
sanitized=(test_gguf test_tokenizer test_chat test_kv test_attention test_store test_scheduler test_compress test_http test_server)
cmake --preset debug
cmake --build --preset debug -j "$jobs" --target "${sanitized[@]}"
ctest --preset debug -j "$jobs" -L '^(gguf|tokenizer|chat|kv|attention|store|scheduler|compress|http|server)$'
# The server itself under AddressSanitizer + UBSan, driven by the hostile and protocol suites
# (deep JSON, floods, smuggling, half-closes): a stack overflow or a bad access fails them.
cmake --build --preset debug -j "$jobs" --target tangram
TANGRAM_E2E_SANITIZED=1 bash tests/server/e2e/run.sh build/debug/tangram hostile protocol

# Fuzz stage: the libFuzzer harnesses (clang, ASan + UBSan) replay fuzz/regressions/ and fuzz each
# parser of untrusted input for 45 s; about 7 minutes with the build on 2 cores (docs/fuzzing.md).
./scripts/fuzz.sh --seconds 45

cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
