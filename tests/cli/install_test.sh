#!/usr/bin/env bash
# The installed binary is relocatable: `cmake --install` into a temporary prefix, the prefix
# moved elsewhere, then `tangram run`, `tangram run --kv-policy tangram` (profiled from the
# installed calibration text into a fresh cache, then reused), `tangram serve` (start, GET /health, stop) and
# `tangram bench --quick` from there, finding their data in <prefix>/share/tangram and not
# through the source tree. The bench run is cut to full and tangram on a 2-layer model with two
# short conversations (the whole --quick run takes over ten minutes on a shared 2-core machine);
# tangram still loads its profile from the installed data.
# Usage: install_test.sh CMAKE BUILD_DIR SHARED_DIR
set -euo pipefail
cmake_bin=$1
build_dir=$2
shared_dir=$3
model="$shared_dir/models/stories260K/stories260K.gguf"

work=$(mktemp -d)
server=""
cleanup() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$cmake_bin" --install "$build_dir" --prefix "$work/prefix" >/dev/null
mv "$work/prefix" "$work/moved"
bin="$work/moved/bin/tangram"
test -x "$bin"
test -d "$work/moved/share/tangram/profiles"
test -f "$work/moved/share/tangram/calibration/dialogue.txt"
# bench-model's llama.cpp oracle scripts, found through share/tangram (node_modules left out).
test -f "$work/moved/share/tangram/oracle/oracle.mjs"
test ! -e "$work/moved/share/tangram/oracle/node_modules"
unset TANGRAM_DATA_DIR
cd "$work"

echo "== run"
"$bin" run -q -m "$model" -p "Once upon a time" --temp 0 -n 16 >run.txt
grep -q "^Once upon a time" run.txt

echo "== run --kv-policy tangram (profiled from the installed calibration text, then reused)"
export TANGRAM_PROFILE_CACHE="$work/profiles"
"$bin" run -q -m "$model" -p "Once upon a time" --temp 0 -n 8 --kv-policy tangram --kv-ratio 0.5 >tangram.txt 2>tangram.log ||
  { cat tangram.log; exit 1; }
grep -q "calibration text in $work/moved/share/tangram/calibration" tangram.log || { cat tangram.log; exit 1; }
grep -q "(made in" tangram.log || { cat tangram.log; exit 1; }
"$bin" run -q -m "$model" -p "Once upon a time" --temp 0 -n 8 --kv-policy tangram --kv-ratio 0.5 >tangram.txt 2>tangram.log ||
  { cat tangram.log; exit 1; }
grep -q "(reused" tangram.log || { cat tangram.log; exit 1; }
unset TANGRAM_PROFILE_CACHE

echo "== serve"
"$bin" serve -m "$model" --port 0 >serve.log 2>&1 &
server=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^listening on http:\/\/[^:]*:\([0-9]*\)$/\1/p' serve.log)
  [[ -n "$port" ]] && break
  kill -0 "$server" 2>/dev/null || { cat serve.log; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat serve.log; exit 1; }
curl -fsS "http://127.0.0.1:$port/health" >health.txt
kill -TERM "$server"
wait "$server"
server=""

echo "== bench --quick"
"$bin" bench --quick --policies full,tangram --layers 2 --conversations 2 --turns 2 --no-accuracy -o bench-out >bench.log 2>&1 || { cat bench.log; exit 1; }
test -s bench-out/report.json
echo "install_relocatable: OK"
