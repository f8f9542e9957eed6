// Weight-matrix products. Two strategies:
//  * decode path (few tokens; K-quants at any count): the activations are quantised once into
//    the weight type's companion type, then the threads take the rows of W in panels that fit
//    L2, one at a time from a shared counter; each panel is read from memory once and run over
//    every chunk of tokens, each row dotted with a chunk's tokens while it sits in L1
//    (multi-token kernels unpack each weight block once for up to 4 tokens; tile kernels take
//    several rows x several tokens, so each activation block is also loaded once per tile).
//    Q4_K and Q8_0 from 8 tokens: each panel is first repacked into groups of 16 interleaved
//    rows (interleaved_rows.h) where the level has a kernel for it. Q8_0 and Q4_K weights the
//    loader interleaved in place (interleave_for_matmul) run those kernels at every token
//    count, reading the groups where they lie.
//  * prefill path (many tokens, float and 32-element types): the rows of W are cut into one
//    share per thread, and a thread runs a single-threaded cblas_sgemm on a share (F32 weights
//    in place, other types dequantised tile by tile into a per-thread float buffer). Each of
//    those BLAS calls runs single-threaded (SingleThreadedBlas) so OpenBLAS' OpenMP team never
//    competes with the pool's threads for the cores.
// Products sharing one input (q/k/v; gate/up) run in one parallel region (matmul_group,
// matmul_swiglu): the threads compute every matrix's rows with the path and kernels matmul
// would pick, so the region costs one hand-off instead of one per matrix.
#include "kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <span>
#include <utility>
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
// call, so it needs enough tokens to pay it back. While it copied 4 bytes at a time per row, a
// step of 8 sequences took 1.1x (Q8_0) and 1.4x (Q4_K) the 4 x 4 tiles' CPU time, so the switch
// sat at 16. As transposes of 4-byte steps it pays back at 8 (bench-model -t 1 --concurrency 8
// on the 8-layer models, interleaved A/B): Q8_0 0.64-0.68x the tiles' CPU time (AVX2 level
// 0.71-0.92x), Q4_K 0.84-0.92x (AVX2 0.96-1.0x); at 4 no difference above the noise.
constexpr int64_t kInterleaveMinTokens = 8;
// Activation elements from which quantising them is worth a pool dispatch.
constexpr int64_t kParallelQuantizeElems = int64_t{1} << 16;
// Rows of W dequantised per sgemm call on the prefill path: [kPrefillTile][cols] floats per
// thread (1 MiB at cols = 4096), big enough to amortise packing X, small enough for L2/L3.
constexpr int64_t kPrefillTile = 64;
// Rows per scheduling grain, so units of work start on whole tiles, groups and cache lines.
constexpr int64_t kRowGrain = 16;

bool shape_ok(const TensorView& W) {
  if (W.data == nullptr || W.cols() <= 0 || W.rows() < 0) return false;
  if (W.layout != TensorLayout::kRowMajor && W.type != GgmlType::Q8_0 && W.type != GgmlType::Q4_K)
    return false;  // no such layout
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
std::vector<float>& tile_scratch() {
  thread_local std::vector<float> buf;
  return buf;
}

// Row r of W in the row-major layout: in place, or de-interleaved into the thread's scratch
// (valid until the next call) for the paths that read rows of a weight interleaved at load.
const uint8_t* row_major_row(const TensorView& W, int64_t r) {
  if (r >= W.interleaved_rows()) return W.row(r);
  thread_local std::vector<uint8_t> buf;  // [row_bytes]
  buf.resize(W.row_bytes());
  W.copy_row(r, buf.data());
  return buf.data();
}

// One group of 16 interleaved rows (nr of them real, starting at row r) times tokens
// [t0, t1): Y[t][r + i] for i < nr.
template <typename Interleaved>
void interleaved_group(vec::InterleavedGemmFn<Interleaved> gemm, const Interleaved* group,
                       int64_t nblocks, int nr, const uint8_t* act, size_t act_row_bytes,
                       const int32_t* sums, int64_t t0, int64_t t1, int64_t r, int64_t rows,
                       float* Y) {
  const size_t sums_stride =
      static_cast<size_t>(nblocks) * vec::InterleavedKernel<Interleaved>::kSumsPerBlock;
  constexpr int64_t kTile = vec::InterleavedKernel<Interleaved>::kTileTokens;
  float out[kTile * vec::kInterleavedRows];  // [token][row of the group]
  for (int64_t t = t0; t < t1; t += kTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kTile, t1 - t));
    const uint8_t* a = act + t * act_row_bytes;
    const int32_t* token_sums = sums + static_cast<size_t>(t) * sums_stride;
    if (nr == vec::kInterleavedRows) {
      gemm(group, nblocks, a, act_row_bytes, token_sums, sums_stride, nt, Y + t * rows + r,
           static_cast<size_t>(rows));
      continue;
    }
    gemm(group, nblocks, a, act_row_bytes, token_sums, sums_stride, nt, out, vec::kInterleavedRows);
    for (int k = 0; k < nt; ++k)
      std::copy_n(out + k * vec::kInterleavedRows, nr, Y + (t + k) * rows + r);
  }
}

template <typename Interleaved>
std::vector<Interleaved>& interleaved_scratch() {
  thread_local std::vector<Interleaved> buf;
  return buf;
}

// Products run together in one parallel region (matmul_group), and so per-call scratch the
// calling thread fills before the region is kept per slot.
constexpr size_t kMaxGroup = 4;

// One product Y = X · Wᵀ made ready for any thread to compute a range of W's rows: the path
// chosen, the activations in the kernel's form and the kernel functions.
struct Product {
  enum class Path { kRowMajor, kInterleavedQ4K, kInterleavedQ8_0, kPrefill };
  const TensorView* W = nullptr;
  float* Y = nullptr;
  Path path = Path::kRowMajor;
  GgmlType act_type = GgmlType::F32;
  const uint8_t* act = nullptr;  // [n][act_row_bytes] in act_type (the float X itself for F32)
  size_t act_row_bytes = 0;
  const int32_t* sums = nullptr;  // interleaved paths: [n][nblocks][kSumsPerBlock]
  int64_t panel_rows = 0;         // decode paths: rows per L2-sized panel
  vec::MultiDotFn multi = nullptr;
  vec::TileDotFn tile = nullptr;  // null: one row at a time
  vec::InterleavedGemmFn<vec::InterleavedQ4_K> gemm_q4_k = nullptr;
  vec::InterleavedGemmFn<vec::InterleavedQ8_0> gemm_q8_0 = nullptr;
};

// Q4_K / Q8_0 over many tokens, rows [r0, r1) (r0 on a group boundary): one L2-sized panel at a
// time is repacked into groups of 16 interleaved rows and every token chunk runs over it.
// Groups of a weight interleaved at load (W.interleaved_rows()) are read in place instead.
template <typename Interleaved>
void interleaved_rows_range(const Product& p, vec::InterleavedGemmFn<Interleaved> gemm, int64_t n,
                            int64_t r0, int64_t r1) {
  constexpr int64_t kGroup = vec::kInterleavedRows;
  static_assert(kRowGrain % kGroup == 0, "units of work must start on whole groups");
  const TensorView& W = *p.W;
  const int64_t rows = W.rows(), cols = W.cols(), nblocks = cols / Interleaved::kBlockElems;
  const int64_t in_place_rows = W.interleaved_rows();
  auto& panel = interleaved_scratch<Interleaved>();  // [group of the panel][block]
  if (r1 > in_place_rows) panel.resize(static_cast<size_t>(p.panel_rows / kGroup * nblocks));
  const auto group_at = [&](int64_t r, int64_t p0) {
    return r < in_place_rows ? reinterpret_cast<const Interleaved*>(W.row(r))
                             : panel.data() + (r - p0) / kGroup * nblocks;
  };
  for (int64_t p0 = r0; p0 < r1; p0 += p.panel_rows) {
    const int64_t p1 = std::min(r1, p0 + p.panel_rows);
    for (int64_t r = std::max(p0, in_place_rows); r < p1; r += kGroup)
      vec::interleave_rows(W.row(r), W.row_bytes(), static_cast<int>(std::min(kGroup, p1 - r)),
                           cols, panel.data() + (r - p0) / kGroup * nblocks);
    for (int64_t c0 = 0; c0 < n; c0 += kDecodeTokenChunk) {
      const int64_t c1 = std::min(n, c0 + kDecodeTokenChunk);
      for (int64_t r = p0; r < p1; r += kGroup)
        interleaved_group(gemm, group_at(r, p0), nblocks,
                          static_cast<int>(std::min(kGroup, p1 - r)), p.act, p.act_row_bytes,
                          p.sums, c0, c1, r, rows, p.Y);
    }
  }
}

// Row-major decode kernels, rows [r0, r1): each panel of rows is read from memory once; every
// token chunk then runs over it while it sits in L2. Token chunks keep the activations a row
// meets in L2 beside the panel.
void row_major_rows_range(const Product& p, int64_t n, int64_t r0, int64_t r1) {
  const TensorView& W = *p.W;
  const int64_t rows = W.rows(), cols = W.cols();
  const int64_t rows_per_step = p.tile != nullptr ? vec::kTileRows : 1;
  float out[vec::kTileRows * vec::kMultiTokens];  // [row of the tile][token]
  for (int64_t p0 = r0; p0 < r1; p0 += p.panel_rows) {
    const int64_t p1 = std::min(r1, p0 + p.panel_rows);
    for (int64_t c0 = 0; c0 < n; c0 += kDecodeTokenChunk) {
      const int64_t c1 = std::min(n, c0 + kDecodeTokenChunk);
      for (int64_t r = p0; r < p1; r += rows_per_step) {
        const int nr = static_cast<int>(std::min(rows_per_step, p1 - r));
        for (int64_t t0 = c0; t0 < c1; t0 += vec::kMultiTokens) {
          const int nt = static_cast<int>(std::min<int64_t>(vec::kMultiTokens, c1 - t0));
          const uint8_t* a = p.act + t0 * p.act_row_bytes;
          if (p.tile != nullptr)
            p.tile(W.row(r), W.row_bytes(), nr, a, p.act_row_bytes, nt, cols, out);
          else
            p.multi(W.row(r), a, p.act_row_bytes, nt, cols, out);
          for (int i = 0; i < nr; ++i)
            for (int t = 0; t < nt; ++t)
              p.Y[(t0 + t) * rows + r + i] = out[i * vec::kMultiTokens + t];
        }
      }
    }
  }
}

// Dequantise + sgemm, rows [r0, r1): one single-threaded sgemm on F32 weights in place, or
// one per tile of dequantised rows in a per-thread float buffer.
void prefill_rows_range(const Product& p, const float* X, int64_t n, int64_t r0, int64_t r1) {
  const TensorView& W = *p.W;
  const int64_t rows = W.rows(), cols = W.cols();
  const int ni = static_cast<int>(n), ki = static_cast<int>(cols), ldc = static_cast<int>(rows);
  const SingleThreadedBlas single_threaded;
  if (W.type == GgmlType::F32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, static_cast<int>(r1 - r0), ki, 1.0f, X,
                ki, reinterpret_cast<const float*>(W.row(r0)), ki, 0.0f, p.Y + r0,
                ldc);  // F32: never interleaved
    return;
  }
  auto& tile = tile_scratch();  // [kPrefillTile][cols]
  tile.resize(static_cast<size_t>(kPrefillTile * cols));
  for (int64_t t0 = r0; t0 < r1; t0 += kPrefillTile) {
    const int64_t t1 = std::min(r1, t0 + kPrefillTile);
    for (int64_t r = t0; r < t1; ++r)
      dequantize_row(W.type, row_major_row(W, r), tile.data() + (r - t0) * cols, cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, static_cast<int>(t1 - t0), ki, 1.0f, X,
                ki, tile.data(), ki, 0.0f, p.Y + t0, ldc);
  }
}

void run_rows_range(const Product& p, const float* X, int64_t n, int64_t r0, int64_t r1) {
  switch (p.path) {
    case Product::Path::kRowMajor:
      row_major_rows_range(p, n, r0, r1);
      return;
    case Product::Path::kInterleavedQ4K:
      interleaved_rows_range(p, p.gemm_q4_k, n, r0, r1);
      return;
    case Product::Path::kInterleavedQ8_0:
      interleaved_rows_range(p, p.gemm_q8_0, n, r0, r1);
      return;
    case Product::Path::kPrefill:
      prefill_rows_range(p, X, n, r0, r1);
      return;
  }
}

// Per-slot scratch of the calling thread: quantised activations and interleaved-path sums.
std::vector<uint8_t>& activation_scratch(size_t slot) {
  thread_local std::array<std::vector<uint8_t>, kMaxGroup> bufs;
  return bufs[slot];
}
std::vector<int32_t>& sum_scratch(size_t slot) {
  thread_local std::array<std::vector<int32_t>, kMaxGroup> bufs;
  return bufs[slot];
}

// The activations in `type`, quantised once per call: an earlier product of the group with the
// same activation type lends its copy.
const uint8_t* activations_for(std::span<const Product> earlier, GgmlType type, size_t slot,
                               const float* X, int64_t n, int64_t cols, ThreadPool& pool) {
  if (type == GgmlType::F32) return reinterpret_cast<const uint8_t*>(X);
  for (const Product& e : earlier)
    if (e.path != Product::Path::kPrefill && e.act_type == type) return e.act;
  const size_t row_bytes = ggml_row_bytes(type, cols);
  auto& buf = activation_scratch(slot);
  buf.resize(static_cast<size_t>(n) * row_bytes);
  auto quantize = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      quantize_row(type, X + t * cols, buf.data() + t * row_bytes, cols);
  };
  // Many tokens (prefill through this path): quantise them on all threads.
  if (n * cols >= kParallelQuantizeElems)
    pool.parallel_for(n, quantize);
  else
    quantize(0, n, 0);
  return buf.data();
}

// Per-token activation sums the interleaved kernels of Interleaved take; shared with an earlier
// product of the same interleaved path.
template <typename Interleaved>
const int32_t* interleaved_sums(std::span<const Product> earlier, const Product& p, size_t slot,
                                int64_t n) {
  for (const Product& e : earlier)
    if (e.path == p.path && e.act == p.act) return e.sums;
  const int64_t cols = p.W->cols();
  const int64_t sums_stride =
      cols / Interleaved::kBlockElems * vec::InterleavedKernel<Interleaved>::kSumsPerBlock;
  auto& sums = sum_scratch(slot);
  sums.resize(static_cast<size_t>(n * sums_stride));
  for (int64_t t = 0; t < n; ++t)
    vec::activation_sums(p.act + t * p.act_row_bytes, cols,
                         static_cast<const Interleaved*>(nullptr), sums.data() + t * sums_stride);
  return sums.data();
}

// Makes product `slot` of a group ready for the decode path (quantised activations; the
// interleaved kernels where the type and level have them and n is large enough).
Product prepare_decode(std::span<const Product> earlier, const TensorView& W, float* Y,
                       const float* X, int64_t n, ThreadPool& pool) {
  const size_t slot = earlier.size();
  Product p;
  p.W = &W;
  p.Y = Y;
  p.act_type = vec::activation_type(W.type);
  p.act_row_bytes = ggml_row_bytes(p.act_type, W.cols());
  p.act = activations_for(earlier, p.act_type, slot, X, n, W.cols(), pool);
  const cpu::KernelLevel level = cpu::active_level();
  // A weight interleaved at load runs the interleaved kernels at every token count: measured
  // against the row-major kernels (docs/benchmarks.md, "Weights interleaved at load"), Q8_0
  // 0.9-1.0x the CPU time at one token and 0.3-0.85x at 2-7 on the AVX-512 level, 0.9x and
  // 0.65-0.95x on AVX2; Q4_K's decode steps of 1 / 2-8 sequences 0.8x / 0.42-0.58x (AVX2 0.66x /
  // 0.62-0.72x). The portable kernel stands in where a level had none.
  const bool in_place = W.interleaved_rows() > 0;
  if (n >= kInterleaveMinTokens || in_place) {
    p.gemm_q4_k = W.type == GgmlType::Q4_K ? vec::gemm_interleaved_q4_k_fn(level) : nullptr;
    p.gemm_q8_0 = W.type == GgmlType::Q8_0 ? vec::gemm_interleaved_q8_0_fn(level) : nullptr;
  }
  if (in_place && W.type == GgmlType::Q4_K && p.gemm_q4_k == nullptr)
    p.gemm_q4_k =
        static_cast<vec::InterleavedGemmFn<vec::InterleavedQ4_K>>(vec::gemm_interleaved_portable);
  if (in_place && W.type == GgmlType::Q8_0 && p.gemm_q8_0 == nullptr)
    p.gemm_q8_0 =
        static_cast<vec::InterleavedGemmFn<vec::InterleavedQ8_0>>(vec::gemm_interleaved_portable);
  const int64_t group = vec::kInterleavedRows;
  if (p.gemm_q4_k != nullptr || p.gemm_q8_0 != nullptr) {
    p.panel_rows =
        std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / (W.row_bytes() * group))) * group;
    if (p.gemm_q4_k != nullptr) {
      p.path = Product::Path::kInterleavedQ4K;
      p.sums = interleaved_sums<vec::InterleavedQ4_K>(earlier, p, slot, n);
    } else {
      p.path = Product::Path::kInterleavedQ8_0;
      p.sums = interleaved_sums<vec::InterleavedQ8_0>(earlier, p, slot, n);
    }
    return p;
  }
  p.path = Product::Path::kRowMajor;
  p.multi = vec::multi_dot_fn(W.type);
  p.tile = vec::tile_dot_fn(W.type);
  const int64_t rows_per_step = p.tile != nullptr ? vec::kTileRows : 1;
  // Whole tiles of rows per panel, at least one.
  p.panel_rows =
      std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / W.row_bytes()) / rows_per_step) *
      rows_per_step;
  return p;
}

Product prepare_prefill(const TensorView& W, float* Y) {
  Product p;
  p.W = &W;
  p.Y = Y;
  p.path = Product::Path::kPrefill;
  return p;
}

// The path matmul picks for W at n tokens.
Product prepare(std::span<const Product> earlier, const TensorView& W, float* Y, const float* X,
                int64_t n, ThreadPool& pool) {
  // BLAS takes int dimensions; anything larger stays on the decode path.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const bool blas_fits = n <= kIntMax && W.rows() <= kIntMax && W.cols() <= kIntMax;
  // Weights interleaved at load are Q8_0 or Q4_K, whose decode path never hands over to sgemm.
  if (n <= matmul_paths::decode_max_tokens(W.type) || !blas_fits || W.interleaved_rows() > 0)
    return prepare_decode(earlier, W, Y, X, n, pool);
  return prepare_prefill(W, Y);
}

// Rows one unit of work takes from p: a panel in whole kRowGrain groups on the decode paths, at
// most an even share per thread (so a matrix of one panel still splits); on the prefill path an
// even share per thread, one sgemm as large as before.
int64_t unit_rows(const Product& p, int n_threads) {
  const int64_t share = ThreadPool::chunk(p.W->rows(), kRowGrain, 0, n_threads).second;
  if (p.path == Product::Path::kPrefill) return share;
  return std::min(share, std::max<int64_t>(kRowGrain, p.panel_rows / kRowGrain * kRowGrain));
}

// Runs every product in one parallel region. The rows are cut into units (unit_rows) that the
// threads take in turn from a shared counter, so a thread that is late (descheduled, or slowed by
// the other's memory traffic) leaves its remaining units to the others instead of being waited
// for; each row is computed by the same kernels whichever thread takes it, so the outputs do not
// depend on the split. With shared_rows (every product has the rows of the first) a unit covers
// its rows in every product and then calls after(r0, r1) on them; otherwise the units run
// product by product and after is not called.
template <typename After>
void run_products(std::span<const Product> products, const float* X, int64_t n, ThreadPool& pool,
                  bool shared_rows, After after) {
  const int n_threads = pool.size();
  std::array<int64_t, kMaxGroup + 1> first{};  // index of each product's first unit; first[k] = all
  std::array<int64_t, kMaxGroup> step{};       // rows per unit of each product
  const size_t scheduled = shared_rows ? 1 : products.size();
  for (size_t i = 0; i < scheduled; ++i) {
    step[i] = unit_rows(products[i], n_threads);
    first[i + 1] = first[i] + (products[i].W->rows() + step[i] - 1) / step[i];
  }
  const int64_t total = first[scheduled];
  std::atomic<int64_t> next{0};
  auto work = [&](int, int) {
    for (int64_t u = next.fetch_add(1, std::memory_order_relaxed); u < total;
         u = next.fetch_add(1, std::memory_order_relaxed)) {
      size_t i = 0;
      while (u >= first[i + 1]) ++i;
      const int64_t r0 = (u - first[i]) * step[i],
                    r1 = std::min(products[i].W->rows(), r0 + step[i]);
      if (!shared_rows) {
        run_rows_range(products[i], X, n, r0, r1);
        continue;
      }
      for (const Product& p : products) run_rows_range(p, X, n, r0, r1);
      after(r0, r1);
    }
  };
  if (total <= 1 || n_threads == 1)
    work(0, 1);
  else
    pool.run(work);
}

void no_epilogue(int64_t, int64_t) {}

// Y = 0 for a malformed view: defined output instead of an out-of-bounds read.
bool zero_if_malformed(const TensorView& W, int64_t n, float* Y) {
  if (shape_ok(W)) return false;
  std::fill(Y, Y + n * std::max<int64_t>(W.rows(), 0), 0.0f);
  return true;
}

}  // namespace

namespace matmul_paths {

void decode(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
  const Product p = prepare_decode({}, W, Y, X, n, pool);
  run_products(std::span<const Product>(&p, 1), X, n, pool, false, no_epilogue);
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
  const Product p = prepare_prefill(W, Y);
  run_products(std::span<const Product>(&p, 1), X, n, pool, false, no_epilogue);
}

}  // namespace matmul_paths

void matmul(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
  if (n <= 0 || W.rows() <= 0 || zero_if_malformed(W, n, Y)) return;
  const Product p = prepare({}, W, Y, X, n, pool);
  run_products(std::span<const Product>(&p, 1), X, n, pool, false, no_epilogue);
}

void matmul_group(std::span<const MatmulOutput> outputs, const float* X, int64_t n,
                  ThreadPool& pool) {
  if (n <= 0) return;
  std::array<Product, kMaxGroup> products;
  size_t count = 0;
  for (const MatmulOutput& out : outputs) {
    if (out.W->rows() <= 0 || zero_if_malformed(*out.W, n, out.Y)) continue;
    products[count] =
        prepare(std::span<const Product>(products.data(), count), *out.W, out.Y, X, n, pool);
    if (++count == kMaxGroup) {
      run_products(std::span<const Product>(products.data(), count), X, n, pool, false,
                   no_epilogue);
      count = 0;
    }
  }
  if (count > 0)
    run_products(std::span<const Product>(products.data(), count), X, n, pool, false, no_epilogue);
}

void matmul_swiglu(const TensorView& gate, const TensorView& up, const float* X, int64_t n,
                   float* gate_y, float* up_y, ThreadPool& pool) {
  if (n <= 0) return;
  const int64_t rows = gate.rows();
  if (rows != up.rows() || !shape_ok(gate) ||
      !shape_ok(up)) {  // no common row split: one after the other
    matmul(gate, X, n, gate_y, pool);
    matmul(up, X, n, up_y, pool);
    const int64_t common = std::max<int64_t>(0, std::min(rows, up.rows()));
    for (int64_t t = 0; t < n; ++t) swiglu(gate_y + t * rows, up_y + t * up.rows(), common);
    return;
  }
  std::array<Product, 2> products;
  products[0] = prepare({}, gate, gate_y, X, n, pool);
  products[1] = prepare(std::span<const Product>(products.data(), 1), up, up_y, X, n, pool);
  run_products(products, X, n, pool, true, [&](int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; ++t) swiglu(gate_y + t * rows + r0, up_y + t * rows + r0, r1 - r0);
  });
}

float row_dot(const TensorView& W, int64_t r, const float* x) {
  if (!shape_ok(W) || r < 0 || r >= W.rows()) return 0.0f;
  const int64_t cols = W.cols();
  switch (W.type) {
    case GgmlType::F32:  // float rows are never interleaved
      return vec::dot_f32_f32(W.row(r), x, cols);
    case GgmlType::F16:
      return vec::dot_f16_f32(W.row(r), x, cols);
    case GgmlType::BF16:
      return vec::dot_bf16_f32(W.row(r), x, cols);
    default: {
      auto& tile = tile_scratch();
      tile.resize(static_cast<size_t>(cols));
      dequantize_row(W.type, row_major_row(W, r), tile.data(), cols);
      return dot_f32(tile.data(), x, cols);
    }
  }
}

void get_row(const TensorView& W, int64_t r, float* out) {
  if (!shape_ok(W) || r < 0 || r >= W.rows()) {
    std::fill(out, out + std::max<int64_t>(W.cols(), 0), 0.0f);
    return;
  }
  dequantize_row(W.type, row_major_row(W, r), out, W.cols());
}

namespace {

// Each whole group of 16 rows of W (at bytes) rewritten in place as Interleaved blocks.
template <typename Interleaved>
void interleave_groups(const TensorView& W, uint8_t* bytes) {
  constexpr int64_t kGroup = vec::kInterleavedRows;
  const size_t group_bytes = static_cast<size_t>(kGroup) * W.row_bytes();
  std::vector<uint8_t> rows_copy(group_bytes);  // [16][row_bytes]: the group's rows, row-major
  for (int64_t r = 0; r + kGroup <= W.rows(); r += kGroup) {
    uint8_t* group = bytes + static_cast<size_t>(r) * W.row_bytes();
    std::copy_n(group, group_bytes, rows_copy.data());
    vec::interleave_rows(rows_copy.data(), W.row_bytes(), static_cast<int>(kGroup), W.cols(),
                         reinterpret_cast<Interleaved*>(group));
  }
}

}  // namespace

TensorLayout interleave_for_matmul(const TensorView& W, uint8_t* bytes) {
  constexpr int64_t kGroup = vec::kInterleavedRows;
  if (W.layout != TensorLayout::kRowMajor || !shape_ok(W) || W.rows() < kGroup) return W.layout;
  const cpu::KernelLevel level = cpu::active_level();
  if (W.type == GgmlType::Q8_0 && vec::gemm_interleaved_q8_0_fn(level) != nullptr) {
    interleave_groups<vec::InterleavedQ8_0>(W, bytes);
    return TensorLayout::kInterleaved16;
  }
  if (W.type == GgmlType::Q4_K && vec::gemm_interleaved_q4_k_fn(level) != nullptr) {
    interleave_groups<vec::InterleavedQ4_K>(W, bytes);
    return TensorLayout::kInterleaved16;
  }
  return W.layout;
}

}  // namespace tangram
