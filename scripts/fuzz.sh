#!/usr/bin/env bash
# Builds the libFuzzer harnesses (the `fuzz` preset: clang, ASan + UBSan) and runs each one for a
# bounded time over a copy of its seed corpus fuzz/corpus/<name>/, after replaying every input
# kept in fuzz/regressions/<name>/. Exits non-zero on any crash, leak, timeout or out-of-memory,
# printing where the reproducer is. See docs/fuzzing.md.
#
#   scripts/fuzz.sh [--seconds N] [--jobs N] [--merge] [--no-build] [harness...]
#
#   --seconds N  fuzzing time per harness (default 60); 0 replays the regressions only
#   --jobs N     harnesses run at once (default: the number of cores)
#   --merge      afterwards, add the inputs that found new coverage to fuzz/corpus/<name>/
#                (otherwise the repository's corpus is never written)
#   --no-build   use the harnesses already in build/fuzz
#   harness      names such as gguf or jinja (default: every fuzz/fuzz_<name>.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=$(nproc)
merge=0
build=1
harnesses=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
if ((${#harnesses[@]} == 0)); then
  for f in fuzz/fuzz_*.cpp; do
    n=$(basename "$f" .cpp)
    harnesses+=("${n#fuzz_}")
  done
fi
for h in "${harnesses[@]}"; do
  [ -f "fuzz/fuzz_$h.cpp" ] || { echo "fuzz.sh: no harness fuzz/fuzz_$h.cpp" >&2; exit 2; }
done

bin_dir=build/fuzz/fuzz
runs=build/fuzz/runs
if ((build)); then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target "${harnesses[@]/#/fuzz_}"
fi

# Reports need symbols; a failed check must stop at the first report, with its stack.
symbolizer=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:symbolize=1}"
# Per input: a hang longer than this is a bug (rendering and parsing are bounded); memory beyond
# the limit is one too (every size read from input must be checked before allocating).
limits=(-timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=2048)

# run_one NAME: replays the regressions, then fuzzes; its output goes to $runs/NAME/log.
run_one() {
  local name=$1 bin="$bin_dir/fuzz_$1" dir="$runs/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  {
    local regressions=()
    if [ -d "fuzz/regressions/$name" ]; then
      while IFS= read -r -d '' f; do regressions+=("$f"); done \
        < <(find "fuzz/regressions/$name" -type f ! -name '*.md' -print0 | sort -z)
    fi
    if ((${#regressions[@]})); then
      echo "== $name: replaying ${#regressions[@]} regression inputs"
      "$bin" "${limits[@]}" -artifact_prefix="$dir/artifacts/" "${regressions[@]}" || return 1
    fi
    if ((seconds > 0)); then
      [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$dir/corpus/"
      echo "== $name: fuzzing for ${seconds}s"
      # The outer timeout only catches a harness that stops answering libFuzzer's own clock.
      timeout --kill-after=10 $((seconds + 120)) \
        "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" "$dir/corpus" || return 1
      if ((merge)); then
        mkdir -p "fuzz/corpus/$name"
        "$bin" "${limits[@]}" -merge=1 "fuzz/corpus/$name" "$dir/corpus"
      fi
    fi
  } >"$dir/log" 2>&1
}

failed=()
declare -A pids=()
wait_one() {
  local pid name
  wait -n -p pid || true
  for name in "${!pids[@]}"; do
    [ "${pids[$name]}" = "$pid" ] || continue
    unset "pids[$name]"
    if wait "$pid" 2>/dev/null; then :; fi
    report "$name" "$(cat "$runs/$name/rc")"
    return
  done
}
report() {
  local name=$1 rc=$2 dir="$runs/$1"
  if [ "$rc" = 0 ]; then
    local stats
    stats=$(grep -E 'stat::number_of_executed_units' "$dir/log" | tail -1 | awk '{print $2}')
    echo "fuzz: $name ok (${stats:-0} inputs run)"
    return
  fi
  failed+=("$name")
  echo "fuzz: $name FAILED (exit $rc); log: $dir/log"
  sed -n '/ERROR: \|runtime error\|fuzz check failed\|ALARM\|out-of-memory\|Test unit written/,+30p' "$dir/log" | head -60
  local a
  for a in "$dir"/artifacts/*; do
    [ -e "$a" ] || continue
    echo "fuzz: reproducer $a"
    echo "fuzz:   reproduce with $bin_dir/fuzz_$name $a"
    echo "fuzz:   once fixed, keep it: cp $a fuzz/regressions/$name/"
  done
}

mkdir -p "$runs"
echo "fuzz: ${harnesses[*]}: ${seconds}s each, $jobs at a time"
for h in "${harnesses[@]}"; do
  while ((${#pids[@]} >= jobs)); do wait_one; done
  ( rc=0; run_one "$h" || rc=$?; echo "$rc" >"$runs/$h/rc"; exit "$rc" ) &
  pids[$h]=$!
done
while ((${#pids[@]})); do wait_one; done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: all harnesses passed"
