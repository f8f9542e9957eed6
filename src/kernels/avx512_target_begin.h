// Compiles every function that follows for AVX-512 F/BW/VL + VNNI, up to
// kernels/avx512_target_end.h. Include it after every other header of the file: the
// out-of-line copies of those headers' inline functions must stay baseline (x86-64-v3) code,
// or the linker could hand AVX-512 versions of them to other files
// (tests/kernels/avx512_confined.sh checks it). No include guard: each AVX-512 file opens its
// own region.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
#endif
