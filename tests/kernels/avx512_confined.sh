#!/usr/bin/env bash
# The x86-64-v3 binary must run on CPUs without AVX-512: every AVX-512 instruction in it (zmm or
# mask registers, registers 16-31, embedded broadcasts, vpdpbusd) must sit in the dispatched
# kernels of tangram::vec::avx512, which run only after CPUID says they can. An AVX-512 copy of
# a shared inline function reaching other code would show up here. Usage: avx512_confined.sh BINARY
set -euo pipefail
bin="$1"
listing=$(objdump -d --no-show-raw-insn -C "$bin" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  /%zmm|%k[0-7]|vpdpbusd|%[xy]mm(1[6-9]|2[0-9]|3[01])[^0-9]|\{1to/ { if (!(fn in seen)) { seen[fn] = 1; print fn } }')
outside=$(grep -v 'tangram::vec::avx512::' <<<"$listing" || true)
if [[ -n "$outside" ]]; then
  echo "AVX-512 instructions outside the dispatched kernels:"
  echo "$outside"
  exit 1
fi
# The check must be able to see them: the dispatched kernels are there.
if ! grep -q 'tangram::vec::avx512::' <<<"$listing"; then
  echo "no AVX-512 kernels found in $bin (objdump listing changed?)"
  exit 1
fi
echo "AVX-512 confined to $(wc -l <<<"$listing") dispatched kernel functions"
