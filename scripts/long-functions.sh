#!/usr/bin/env bash
# Lists C++ functions longer than N lines (default 120) under the given folders (default src),
# longest first, as "file:line: name (lines)". Exits 1 when there is any, 0 when there is none.
#   scripts/long-functions.sh [N] [dirs...]
# Function extents (first to last line, lambdas included) come from Universal Ctags
# (/usr/bin/ctags on Debian and Ubuntu; Exuberant Ctags has no end-line field).
set -euo pipefail

limit=120
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  limit=$1
  shift
fi
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=(src)

command -v ctags >/dev/null || { echo "long-functions: ctags is not installed" >&2; exit 2; }
mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.cc' -o -name '*.h' -o -name '*.hpp' \) | sort)
[[ ${#files[@]} -gt 0 ]] || { echo "long-functions: no C++ files under ${dirs[*]}" >&2; exit 2; }

ctags --version 2>/dev/null | grep -q 'Universal Ctags' ||
  { echo "long-functions: needs Universal Ctags (its end: field gives each function's last line)" >&2; exit 2; }
# One line per function definition: file, first line, last line, name (lambdas: __anon...).
tags=$(ctags -x --_xformat='%F	%n	%e	%N' --kinds-C++=f --language-force=C++ -f - "${files[@]}")
report=$(awk -F'\t' -v limit="$limit" '$3 ~ /^[0-9]+$/ {
    n = $3 - $2 + 1
    name = $4 ~ /^__anon/ ? "(lambda)" : $4
    if (n > limit) printf "%d\t%s:%d: %s (%d lines)\n", n, $1, $2, name, n
  }' <<<"$tags")

report=$(sort -t$'\t' -k1,1nr <<<"$report" | cut -f2- | sed '/^$/d')
if [[ -n $report ]]; then
  echo "$report"
  echo "long-functions: $(wc -l <<<"$report") function(s) over $limit lines in ${dirs[*]}" >&2
  exit 1
fi
echo "long-functions: none over $limit lines in ${dirs[*]}" >&2
