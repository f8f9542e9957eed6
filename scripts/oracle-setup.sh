#!/usr/bin/env bash
# Installs the llama.cpp oracle (node-llama-cpp, prebuilt CPU runtime) used by the comparison
# tests and benchmarks. Idempotent: does nothing when the pinned version is already installed.
set -euo pipefail
cd "$(dirname "$0")/../tools/oracle"
if [ -f node_modules/node-llama-cpp/package.json ] && \
   grep -q '"version": "3.22.1"' node_modules/node-llama-cpp/package.json; then
  echo "oracle: node-llama-cpp 3.22.1 present"
  exit 0
fi
echo "oracle: installing node-llama-cpp (about 700 MB, prebuilt CPU runtime)"
# npm ci refuses this lock: the package lists optional binaries for other platforms that the
# registry no longer serves, so the lock covers Linux only; install honours the lock as it is.
npm install --ignore-scripts --no-audit --no-fund --loglevel=error
