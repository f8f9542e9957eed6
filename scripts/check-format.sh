#!/usr/bin/env bash
# Fails when a C++ file of the repository differs from what clang-format makes of it under
# .clang-format, and lists those files. --fix rewrites them instead.
#   scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  ""|--fix) ;;
  *) echo "check-format: unknown argument '$1' (use --fix or --help)" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2; exit 2; }
# Tracked files and new ones git does not ignore (so a file not yet added is checked too).
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.h' | grep -v '^tools/')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format "$f" | cmp -s - "$f" || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'check-format: %d file(s) are not formatted as .clang-format says:\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/check-format.sh --fix (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
