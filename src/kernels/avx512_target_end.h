// Closes the region kernels/avx512_target_begin.h opened. No include guard, like its pair.
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
