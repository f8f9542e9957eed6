// Weight-matrix products. Two strategies:
//  * decode path (few tokens; K-quants at any count): the activations are quantised once into
//    the weight type's companion type, then the pool splits the rows of W; each thread takes
//    its rows in panels that fit L2, each panel read from memory once and run over every
//    chunk of tokens, each row dotted with a chunk's tokens while it sits in L1 (multi-token
//    kernels unpack each weight block once for up to 4 tokens; tile kernels take several
//    rows x several tokens, so each activation block is also loaded once per tile). Q4_K and
//    Q8_0 from 16 tokens: each panel is first repacked into groups of 16 interleaved rows
//    (interleaved_rows.h) where the level has a kernel for it.
//  * prefill path (many tokens, float and 32-element types): the pool splits the rows of W;
//    each thread runs a single-threaded cblas_sgemm on its slice (F32 weights in place, other
//    types dequantised tile by tile into a per-thread float buffer). Each of those BLAS calls
//    runs single-threaded (SingleThreadedBlas) so OpenBLAS' OpenMP team never competes with
//    the pool's threads for the cores.
#include "kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/interleaved_rows.h"
#include "kernels/matmul_paths.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/vec_dot.h"

namespace tangram {
namespace {

// Tokens whose activations the decode path keeps hot while it sweeps the rows: 32 tokens of
// Q8_K activations at 4096 columns are 150 KiB.
constexpr int64_t kDecodeTokenChunk = 32;
// Weight bytes of one panel of rows on the decode path: with a token chunk's activations
// (up to ~360 KiB at 9728 columns) it stays within a 1 MiB L2 (Zen 4; Zen 3 and most Intel
// cores hold 512 KiB-2 MiB, where the panel alone still fits).
constexpr size_t kPanelBytes = size_t{384} << 10;
// Tokens from which the decode path runs Q4_K and Q8_0 through panels repacked into 16
// interleaved rows (interleaved_rows.h), on both levels. The repack is paid once per panel per
// call, so it needs enough tokens to pay it back. In the kernel benchmarks AVX-512 at n = 8
// already looked ahead (0.82-0.97x the row-major tiles' CPU time, BM_MatvecCached and
// BM_BatchDecode), but in the model's step of 8 sequences it was 1.1x (Q8_0) and 1.4x (Q4_K)
// the tiles' CPU time (bench-model -t 1 --concurrency 8, interleaved A/B); from 16 tokens it
// wins in both (n = 16 0.60-0.75x; AVX2 0.84x).
constexpr int64_t kInterleaveMinTokens = 16;
// Activation elements from which quantising them is worth a pool dispatch.
constexpr int64_t kParallelQuantizeElems = int64_t{1} << 16;
// Rows of W dequantised per sgemm call on the prefill path: [kPrefillTile][cols] floats per
// thread (1 MiB at cols = 4096), big enough to amortise packing X, small enough for L2/L3.
constexpr int64_t kPrefillTile = 64;
// Rows per scheduling grain, so threads' slices start on whole tiles / cache lines.
constexpr int64_t kRowGrain = 16;

bool shape_ok(const TensorView& W) {
  if (W.data == nullptr || W.cols() <= 0 || W.rows() < 0) return false;
  const auto info = ggml_type_info(W.type);
  if (W.cols() % info.block_elems != 0) return false;
  return W.nbytes >= static_cast<size_t>(W.rows()) * W.row_bytes();
}

// OpenBLAS' OpenMP build sizes each call's team from the calling thread's OpenMP ICV
// (omp_get_max_threads), and resets its global thread count whenever two callers disagree;
// two pool threads with the default ICV each start a team, thrash that global and
// oversubscribe the cores (measured: 10x slower). Holding the ICV at 1 on each pool thread for
// the duration of its BLAS calls keeps every call single-threaded; the previous value comes
// back afterwards so the caller's own OpenMP / BLAS use is unchanged.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadedBlas() { omp_set_num_threads(saved_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

// Scratch that lives as long as the thread, so the hot path does not allocate per call.
std::vector<uint8_t>& activation_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}
std::vector<int32_t>& sum_scratch() {
  thread_local std::vector<int32_t> buf;
  return buf;
}
std::vector<float>& tile_scratch() {
  thread_local std::vector<float> buf;
  return buf;
}

// One group of 16 interleaved rows (nr of them real, starting at row r) times tokens
// [t0, t1): Y[t][r + i] for i < nr.
template <typename Interleaved>
void interleaved_group(vec::InterleavedGemmFn<Interleaved> gemm, const Interleaved* group, int64_t nblocks, int nr,
                       const uint8_t* act, size_t act_row_bytes, const int32_t* sums, int64_t t0, int64_t t1,
                       int64_t r, int64_t rows, float* Y) {
  const size_t sums_stride = static_cast<size_t>(nblocks) * Interleaved::kSumsPerBlock;
  float out[vec::kInterleavedTokens * vec::kInterleavedRows];  // [token][row of the group]
  for (int64_t t = t0; t < t1; t += vec::kInterleavedTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(vec::kInterleavedTokens, t1 - t));
    const uint8_t* a = act + t * act_row_bytes;
    const int32_t* token_sums = sums + static_cast<size_t>(t) * sums_stride;
    if (nr == vec::kInterleavedRows) {
      gemm(group, nblocks, a, act_row_bytes, token_sums, sums_stride, nt, Y + t * rows + r, static_cast<size_t>(rows));
      continue;
    }
    gemm(group, nblocks, a, act_row_bytes, token_sums, sums_stride, nt, out, vec::kInterleavedRows);
    for (int k = 0; k < nt; ++k) std::copy_n(out + k * vec::kInterleavedRows, nr, Y + (t + k) * rows + r);
  }
}

template <typename Interleaved>
std::vector<Interleaved>& interleaved_scratch() {
  thread_local std::vector<Interleaved> buf;
  return buf;
}

// Q4_K / Q8_0 over many tokens: each thread repacks one L2-sized panel of its rows at a time
// into groups of 16 interleaved rows and runs every token chunk over it. act: [n][act_row_bytes]
// rows of the companion type.
template <typename Interleaved>
void decode_interleaved(const TensorView& W, const uint8_t* act, size_t act_row_bytes, int64_t n, float* Y,
                        ThreadPool& pool, vec::InterleavedGemmFn<Interleaved> gemm) {
  constexpr int64_t kGroup = vec::kInterleavedRows;
  static_assert(kRowGrain % kGroup == 0, "threads' slices must start on whole groups");
  const int64_t rows = W.rows(), cols = W.cols(), nblocks = cols / Interleaved::kBlockElems;
  const int64_t sums_stride = nblocks * Interleaved::kSumsPerBlock;
  auto& sums = sum_scratch();  // [n][nblocks][kSumsPerBlock]
  sums.resize(static_cast<size_t>(n * sums_stride));
  for (int64_t t = 0; t < n; ++t)
    vec::activation_sums(act + t * act_row_bytes, cols, static_cast<const Interleaved*>(nullptr),
                         sums.data() + t * sums_stride);
  const size_t w_stride = W.row_bytes();
  const int64_t panel_rows = std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / (w_stride * kGroup))) * kGroup;
  pool.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1, int) {
        auto& panel = interleaved_scratch<Interleaved>();  // [group of the panel][block]
        panel.resize(static_cast<size_t>(panel_rows / kGroup * nblocks));
        for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
          const int64_t p1 = std::min(r1, p0 + panel_rows);
          for (int64_t r = p0; r < p1; r += kGroup)
            vec::interleave_rows(W.row(r), w_stride, static_cast<int>(std::min(kGroup, p1 - r)), cols,
                                 panel.data() + (r - p0) / kGroup * nblocks);
          for (int64_t c0 = 0; c0 < n; c0 += kDecodeTokenChunk) {
            const int64_t c1 = std::min(n, c0 + kDecodeTokenChunk);
            for (int64_t r = p0; r < p1; r += kGroup)
              interleaved_group(gemm, panel.data() + (r - p0) / kGroup * nblocks, nblocks,
                                static_cast<int>(std::min(kGroup, p1 - r)), act, act_row_bytes, sums.data(), c0, c1,
                                r, rows, Y);
          }
        }
      },
      kRowGrain);
}

// Runs the interleaved path where the type and level have a kernel and n is large enough;
// false: the caller runs the row-major kernels.
bool try_decode_interleaved(const TensorView& W, const uint8_t* act, size_t act_row_bytes, int64_t n, float* Y,
                            ThreadPool& pool) {
  if (n < kInterleaveMinTokens) return false;
  const cpu::KernelLevel level = cpu::active_level();
  if (W.type == GgmlType::Q4_K) {
    const auto gemm = vec::gemm_interleaved_q4_k_fn(level);
    if (gemm != nullptr) decode_interleaved(W, act, act_row_bytes, n, Y, pool, gemm);
    return gemm != nullptr;
  }
  if (W.type == GgmlType::Q8_0) {
    const auto gemm = vec::gemm_interleaved_q8_0_fn(level);
    if (gemm != nullptr) decode_interleaved(W, act, act_row_bytes, n, Y, pool, gemm);
    return gemm != nullptr;
  }
  return false;
}

}  // namespace

namespace matmul_paths {

void decode(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
  const int64_t rows = W.rows(), cols = W.cols();
  const GgmlType act_type = vec::activation_type(W.type);
  const size_t act_row_bytes = ggml_row_bytes(act_type, cols);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(X);  // [n][act_row_bytes]
  if (act_type != GgmlType::F32) {
    auto& buf = activation_scratch();
    buf.resize(static_cast<size_t>(n) * act_row_bytes);
    auto quantize = [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) quantize_row(act_type, X + t * cols, buf.data() + t * act_row_bytes, cols);
    };
    // Many tokens (prefill through this path): quantise them on all threads.
    if (n * cols >= kParallelQuantizeElems)
      pool.parallel_for(n, quantize);
    else
      quantize(0, n, 0);
    act = buf.data();
  }
  if (try_decode_interleaved(W, act, act_row_bytes, n, Y, pool)) return;
  const vec::MultiDotFn multi = vec::multi_dot_fn(W.type);
  const vec::TileDotFn tile = vec::tile_dot_fn(W.type);  // null: one row at a time
  const int64_t rows_per_step = tile != nullptr ? vec::kTileRows : 1;
  const size_t w_stride = W.row_bytes();
  // Whole tiles of rows per panel, at least one.
  const int64_t panel_rows =
      std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / w_stride) / rows_per_step) * rows_per_step;
  pool.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1, int) {
        float out[vec::kTileRows * vec::kMultiTokens];  // [row of the tile][token]
        // Each panel of this thread's rows is read from memory once; every token chunk then
        // runs over it while it sits in L2. Token chunks keep the activations a row meets in
        // L2 beside the panel.
        for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
          const int64_t p1 = std::min(r1, p0 + panel_rows);
          for (int64_t c0 = 0; c0 < n; c0 += kDecodeTokenChunk) {
            const int64_t c1 = std::min(n, c0 + kDecodeTokenChunk);
            for (int64_t r = p0; r < p1; r += rows_per_step) {
              const int nr = static_cast<int>(std::min(rows_per_step, p1 - r));
              for (int64_t t0 = c0; t0 < c1; t0 += vec::kMultiTokens) {
                const int nt = static_cast<int>(std::min<int64_t>(vec::kMultiTokens, c1 - t0));
                if (tile != nullptr)
                  tile(W.row(r), w_stride, nr, act + t0 * act_row_bytes, act_row_bytes, nt, cols, out);
                else
                  multi(W.row(r), act + t0 * act_row_bytes, act_row_bytes, nt, cols, out);
                for (int i = 0; i < nr; ++i)
                  for (int t = 0; t < nt; ++t) Y[(t0 + t) * rows + r + i] = out[i * vec::kMultiTokens + t];
              }
            }
          }
        }
      },
      kRowGrain);
}

int64_t decode_max_tokens(GgmlType type, cpu::KernelLevel level) {
  // Crossovers measured on one thread (bench_kernels BM_PathCrossover: CPU time of the decode
  // path vs dequantise + sgemm, 256 x 4096 weights, n = 16..512): float weights lose to
  // sgemm's register blocking from about 16 (F32) / 32 (F16, BF16) tokens; Q4_0 (and Q8_0's
  // row-major) dots from about 48 with the AVX2 kernels, never with the AVX-512 VNNI tiles (1.4x
  // sgemm's rate at n = 512). Q8_0 on AVX2 runs interleaved rows from 16 tokens and beats
  // sgemm at every count measured (n = 512: 9.6 against 11.9 ms), so only Q4_0 switches at 48.
  // The K-quant integer kernels beat dequantise + sgemm at every token count measured (up to
  // 512) on both levels, so they always take this path. Q8_K weights have no integer kernel
  // (dequantise + float dot per row).
  constexpr int64_t kAlways = std::numeric_limits<int64_t>::max();
  switch (type) {
    case GgmlType::F32:
      return 12;
    case GgmlType::F16:
    case GgmlType::BF16:
      return 24;
    case GgmlType::Q4_0:
      return level == cpu::KernelLevel::Avx512Vnni ? kAlways : 48;
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return kAlways;
    case GgmlType::Q8_K:
      break;
  }
  return 2;
}

void prefill(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
  const int64_t rows = W.rows(), cols = W.cols();
  const int ni = static_cast<int>(n), ki = static_cast<int>(cols), ldc = static_cast<int>(rows);
  pool.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1, int) {
        const SingleThreadedBlas single_threaded;
        if (W.type == GgmlType::F32) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, static_cast<int>(r1 - r0), ki,
                      1.0f, X, ki, reinterpret_cast<const float*>(W.row(r0)), ki, 0.0f, Y + r0, ldc);
          return;
        }
        auto& tile = tile_scratch();  // [kPrefillTile][cols]
        tile.resize(static_cast<size_t>(kPrefillTile * cols));
        for (int64_t t0 = r0; t0 < r1; t0 += kPrefillTile) {
          const int64_t t1 = std::min(r1, t0 + kPrefillTile);
          for (int64_t r = t0; r < t1; ++r) dequantize_row(W.type, W.row(r), tile.data() + (r - t0) * cols, cols);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, static_cast<int>(t1 - t0), ki, 1.0f,
                      X, ki, tile.data(), ki, 0.0f, Y + t0, ldc);
        }
      },
      kRowGrain);
}

}  // namespace matmul_paths

void matmul(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
  if (n <= 0 || W.rows() <= 0) return;
  if (!shape_ok(W)) {  // malformed view: defined output instead of an out-of-bounds read
    std::fill(Y, Y + n * std::max<int64_t>(W.rows(), 0), 0.0f);
    return;
  }
  // BLAS takes int dimensions; anything larger stays on the decode path.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const bool blas_fits = n <= kIntMax && W.rows() <= kIntMax && W.cols() <= kIntMax;
  if (n <= matmul_paths::decode_max_tokens(W.type) || !blas_fits)
    matmul_paths::decode(W, X, n, Y, pool);
  else
    matmul_paths::prefill(W, X, n, Y, pool);
}

float row_dot(const TensorView& W, int64_t r, const float* x) {
  if (!shape_ok(W) || r < 0 || r >= W.rows()) return 0.0f;
  const int64_t cols = W.cols();
  switch (W.type) {
    case GgmlType::F32:
      return vec::dot_f32_f32(W.row(r), x, cols);
    case GgmlType::F16:
      return vec::dot_f16_f32(W.row(r), x, cols);
    case GgmlType::BF16:
      return vec::dot_bf16_f32(W.row(r), x, cols);
    default: {
      auto& tile = tile_scratch();
      tile.resize(static_cast<size_t>(cols));
      dequantize_row(W.type, W.row(r), tile.data(), cols);
      return dot_f32(tile.data(), x, cols);
    }
  }
}

void get_row(const TensorView& W, int64_t r, float* out) {
  if (!shape_ok(W) || r < 0 || r >= W.rows()) {
    std::fill(out, out + std::max<int64_t>(W.cols(), 0), 0.0f);
    return;
  }
  dequantize_row(W.type, W.row(r), out, W.cols());
}

}  // namespace tangram
