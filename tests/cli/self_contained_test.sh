#!/usr/bin/env bash
# The repository alone is enough: its tracked files, copied into an empty folder with nothing
# beside it, hold every model, vocabulary, template and profile the main job and the tests read,
# and no file outside docs/ reaches for a folder beside the repository. The main job (cut to a
# 2-layer model and two short conversations) then runs from the copy's data/ with tangram's
# shipped profile, and the server e2e suites find their model there.
# Usage: self_contained_test.sh SOURCE_DIR TANGRAM_BINARY
set -euo pipefail
src=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/copy"
git -C "$src" ls-files -z | (cd "$src" && xargs -0 cp --parents -t "$work/copy")
cd "$work/copy"

echo "== no file outside docs/ names a folder beside the repository"
if git -C "$src" grep -nE '\.\./shared|/work/shared' -- ':!docs' ':!*.md' ':!tests/cli/self_contained_test.sh'; then
  echo "self_contained: the files above read a folder beside the repository; put what they need in data/" >&2
  exit 1
fi

echo "== what the tests and the main job read is in data/"
for f in models/stories260K/stories260K.gguf models/chat-templates profiles/index.json \
         profiles/keydiff/qwen3-4b-instruct-2507/profile_perlayer.json calibration; do
  test -e "data/$f" || { echo "self_contained: data/$f is missing" >&2; exit 1; }
done
for readme in data/models/*/README.md data/profiles/README.md; do
  grep -qi "licen" "$readme" || { echo "self_contained: $readme names no licence" >&2; exit 1; }
done

echo "== the main job from the copy's data/"
unset TANGRAM_SHARED_DIR
export TANGRAM_DATA_DIR="$work/copy/data" XDG_CACHE_HOME="$work/cache"
"$bin" bench --quick --policies full,tangram --layers 2 --conversations 2 --turns 2 --no-accuracy \
  -o "$work/bench" >"$work/bench.log" 2>&1 || { cat "$work/bench.log"; exit 1; }
test -s "$work/bench/report.json"
echo "self_contained: OK"
