#!/usr/bin/env bash
# Runs the server's end-to-end suite N times in a row on a loaded machine, to show that it does
# not depend on timing: one busy loop per core competes with the server and the clients
# throughout (as a parallel build or another tenant would). Stops at the first failure.
#   tests/server/e2e/repeat.sh /path/to/tangram [N=10]
# E2E_LOAD_PROCS sets the number of busy loops (default: one per core; 0 when something else
# already loads the machine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:?usage: repeat.sh /path/to/tangram [N]}"
n="${2:-10}"
load=()
cleanup() { for p in "${load[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in $(seq "${E2E_LOAD_PROCS:-$(nproc)}"); do
  ( while :; do :; done ) &
  load+=($!)
done
for i in $(seq "$n"); do
  start=$(date +%s)
  if ! bash "$here/run.sh" "$bin" > "/tmp/tangram-e2e-run-$i.log" 2>&1; then
    echo "e2e run $i of $n FAILED under load (log: /tmp/tangram-e2e-run-$i.log)"
    grep -E "^not ok|# fail|Error|assert" "/tmp/tangram-e2e-run-$i.log" | head -20
    exit 1
  fi
  echo "e2e run $i of $n passed under load ($(( $(date +%s) - start )) s): $(grep -E '^# (pass|fail)' "/tmp/tangram-e2e-run-$i.log" | tr '\n' ' ')"
done
echo "all $n e2e runs passed under load"
