// A layout question measured before it is built: the Q8_0 score loop on keys as the pages store
// them (row-major Q8_0 rows, kv_row.h) against the same scores on keys transposed within a run
// of 32 tokens, so that one VNNI instruction serves 16 tokens.
//
// Row-major (the engine's loop, vec::avx512::attention_scores_q8): each token's row is 4 blocks
// of [fp16 scale][32 int8]; a 512-bit vpdpbusd multiplies 64 elements of one row by one lane's
// query, and the 16 partial sums of each (row, lane) are then scaled, added up and reduced
// horizontally: by the code's count about ten instructions per 64 multiply-adds.
//
// Transposed (this file's loop, a candidate page layout): per block of 32 elements, the 32
// tokens' scales [32] fp16, then the values in 4-byte groups [8 groups][32 tokens][4 bytes],
// stored as k + 128. One 64-byte load holds one group of 16 tokens; vpdpbusd against a
// broadcast dword of the query adds 4 products to each of the 16 tokens' sums, so the sums of
// 16 tokens build up in place (no horizontal sum). About 1.2 instructions per 64 multiply-adds.
// Same bytes per token (34 per 32 elements).
//
// The engine now keeps Q8_0 keys this way (key_tiles.h, with each block's scales after its
// values): layouts 2 and 3 time its loop, vec::avx512::attention_tile_scores_q8, on tiles of 32
// and of 16 tokens (pages of 16 tokens, the engine's default), called per attention block as
// the walk calls it.
//
// Every loop computes, for 8 KV heads of `rows` tokens and 4 query lanes each (Qwen3-4B's
// 32 query heads over 8 KV heads, head size 128), every lane's score against every token, in
// blocks of 32 tokens as the attention walk calls them; the setup checks that they agree.
// CPU time; rows 256 stay in L2 (the loop's own cost), 8192 stream from memory.
// args: layout (0: row-major rows, the engine's row loop; 1: this file's loop on transposed
// runs of 32; 2, 3: the engine's tile loop on tiles of 32 and 16), rows
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attention/attention_kernel.h"
#include "attention/attention_kernel_q8.h"
#include "attention/attention_kernel_q8_avx512.h"
#include "kernels/cpu_features.h"
#include "kv/key_tiles.h"
#include "kv/kv_row.h"

namespace tangram {
namespace {

constexpr int kHeadDim = 128;
constexpr int kKvHeads = 8;
constexpr int kLanes = 4;
constexpr int kRun = kAttentionBlock;  // tokens per transposed run: one attention block (32)
constexpr int kBlocks = kHeadDim / kKvQ8Block;
constexpr size_t kRowBytes = static_cast<size_t>(kBlocks) * kKvQ8BlockBytes;
// A transposed block: 32 fp16 scales, then [8 groups][32 tokens][4 bytes].
constexpr size_t kScaleBytes = kRun * sizeof(uint16_t);
constexpr size_t kGroupBytes = kRun * 4;
constexpr size_t kTBlockBytes = kScaleBytes + 8 * kGroupBytes;
constexpr size_t kTRunBytes = kBlocks * kTBlockBytes;

// Row-major Q8_0 rows [rows][kRowBytes] to transposed runs [rows / 32][kTRunBytes].
std::vector<uint8_t> transpose_keys(const std::vector<uint8_t>& rows, int n) {
  std::vector<uint8_t> out(static_cast<size_t>(n / kRun) * kTRunBytes);
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = rows.data() + static_cast<size_t>(t) * kRowBytes;
    uint8_t* run = out.data() + static_cast<size_t>(t / kRun) * kTRunBytes;
    const int tok = t % kRun;
    for (int b = 0; b < kBlocks; ++b) {
      const uint8_t* block = row + static_cast<size_t>(b) * kKvQ8BlockBytes;
      uint8_t* tb = run + static_cast<size_t>(b) * kTBlockBytes;
      std::memcpy(tb + static_cast<size_t>(tok) * 2, block, 2);
      for (int i = 0; i < kKvQ8Block; ++i)
        tb[kScaleBytes + static_cast<size_t>(i / 4) * kGroupBytes + static_cast<size_t>(tok) * 4 +
           i % 4] = static_cast<uint8_t>(block[2 + i] ^ 0x80);
    }
  }
  return out;
}

}  // namespace
}  // namespace tangram

#include "kernels/avx512_target_begin.h"

namespace tangram::vec::avx512 {
namespace {

// scores[lane * 32 + t] = q[lane] . k[t] for the 32 tokens of one transposed run. q: kLanes
// queries in kv_q8::quantise_query's layout; offset[lane][b]: -128 * the sum of the lane's
// block-b values (the keys are k + 128).
void scores_transposed(const uint8_t* q, const int32_t (&offset)[kLanes][kBlocks],
                       const uint8_t* run, float* scores) {
  const size_t lane_bytes = kv_q8::query_bytes(kHeadDim);
  __m512 f[kLanes][2];
  for (auto& lane : f) lane[0] = lane[1] = _mm512_setzero_ps();
  for (int b = 0; b < kBlocks; ++b) {
    const uint8_t* tb = run + static_cast<size_t>(b) * kTBlockBytes;
    __m512i s[kLanes][2];
    for (int ln = 0; ln < kLanes; ++ln) s[ln][0] = s[ln][1] = _mm512_set1_epi32(offset[ln][b]);
    for (int g = 0; g < 8; ++g) {
      const uint8_t* group = tb + kScaleBytes + static_cast<size_t>(g) * kGroupBytes;
      const __m512i k0 = _mm512_loadu_si512(group), k1 = _mm512_loadu_si512(group + 64);
      for (int ln = 0; ln < kLanes; ++ln) {
        int32_t dword;
        std::memcpy(&dword,
                    q + static_cast<size_t>(ln) * lane_bytes + kHeadDim + b * kKvQ8Block + g * 4,
                    4);
        const __m512i qd = _mm512_set1_epi32(dword);
        s[ln][0] = _mm512_dpbusd_epi32(s[ln][0], k0, qd);
        s[ln][1] = _mm512_dpbusd_epi32(s[ln][1], k1, qd);
      }
    }
    const __m512 dk0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tb)));
    const __m512 dk1 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tb + 32)));
    for (int ln = 0; ln < kLanes; ++ln) {
      float dq;
      std::memcpy(
          &dq,
          q + static_cast<size_t>(ln) * lane_bytes + static_cast<size_t>(b) * 8 * sizeof(float), 4);
      const __m512 d = _mm512_set1_ps(dq);
      f[ln][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[ln][0]), _mm512_mul_ps(dk0, d), f[ln][0]);
      f[ln][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[ln][1]), _mm512_mul_ps(dk1, d), f[ln][1]);
    }
  }
  for (int ln = 0; ln < kLanes; ++ln) {
    _mm512_storeu_ps(scores + ln * kRun, f[ln][0]);
    _mm512_storeu_ps(scores + ln * kRun + 16, f[ln][1]);
  }
}

}  // namespace
}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"

namespace tangram {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Heads {
  std::vector<std::vector<uint8_t>> rows;        // [head][rows][kRowBytes]
  std::vector<std::vector<uint8_t>> transposed;  // [head][rows / 32][kTRunBytes]
  std::vector<std::vector<uint8_t>>
      tiles[2];                  // [32, 16 tokens][head]: the engine's key tiles (key_tiles.h)
  std::vector<uint8_t> q;        // [heads][lanes][query_bytes]
  std::vector<int32_t> offsets;  // [heads][lanes][blocks]
};

Heads make_heads(int n) {
  Heads h;
  const auto values = random_floats(static_cast<size_t>(n) * kHeadDim, 7);
  for (int head = 0; head < kKvHeads; ++head) {
    std::vector<uint8_t> rows(static_cast<size_t>(n) * kRowBytes);
    for (int t = 0; t < n; ++t)
      store_kv_row(KvType::Q8_0, values.data() + static_cast<size_t>((t + head) % n) * kHeadDim,
                   rows.data() + static_cast<size_t>(t) * kRowBytes, kHeadDim);
    h.transposed.push_back(transpose_keys(rows, n));
    for (const int run : {32, 16}) {
      std::vector<uint8_t> tiles(rows.size());
      for (int t = 0; t < n; t += run)
        store_tiled_keys(rows.data() + static_cast<size_t>(t) * kRowBytes, std::min(run, n - t),
                         tiles.data() + static_cast<size_t>(t) * kRowBytes, run, 0, kHeadDim);
      h.tiles[run == 32 ? 0 : 1].push_back(std::move(tiles));
    }
    h.rows.push_back(std::move(rows));
  }
  const size_t lane_bytes = kv_q8::query_bytes(kHeadDim);
  const auto q = random_floats(static_cast<size_t>(kKvHeads) * kLanes * kHeadDim, 8);
  h.q.resize(static_cast<size_t>(kKvHeads) * kLanes * lane_bytes);
  for (int l = 0; l < kKvHeads * kLanes; ++l) {
    uint8_t* lane = h.q.data() + static_cast<size_t>(l) * lane_bytes;
    kv_q8::quantise_query(q.data() + static_cast<size_t>(l) * kHeadDim, kHeadDim, lane);
    for (int b = 0; b < kBlocks; ++b) {
      int32_t sum = 0;
      for (int i = 0; i < kKvQ8Block; ++i)
        sum += static_cast<int8_t>(lane[kHeadDim + b * kKvQ8Block + i]);
      h.offsets.push_back(-128 * sum);
    }
  }
  return h;
}

// One head's scores, block by block, in the given layout.
void head_scores(const Heads& h, int head, int n, int layout, float* scores) {
  const size_t lane_bytes = kv_q8::query_bytes(kHeadDim);
  const uint8_t* q = h.q.data() + static_cast<size_t>(head) * kLanes * lane_bytes;
  if (layout == 2 ||
      layout == 3) {  // the engine's tile loop on tiles of 32 (this file's layout) or 16 tokens
    KeyTiles tiles;
    const int run = layout == 2 ? 32 : 16;
    const uint8_t* all = h.tiles[layout - 2][static_cast<size_t>(head)].data();
    tiles.run_tokens = run;
    tiles.n = kRun / run;
    for (int r = 0; r < n / kRun; ++r) {
      for (int i = 0; i < tiles.n; ++i)
        tiles.span[i] = {all + static_cast<size_t>(r * kRun + i * run) * kRowBytes, 0, run,
                         i * run};
      vec::avx512::attention_tile_scores_q8(
          kLanes, q, kHeadDim, tiles, scores + static_cast<size_t>(r) * kLanes * kRun, nullptr);
    }
    return;
  }
  if (layout == 1) {
    int32_t off[kLanes][kBlocks];
    std::memcpy(off, h.offsets.data() + static_cast<size_t>(head) * kLanes * kBlocks, sizeof(off));
    for (int r = 0; r < n / kRun; ++r)
      vec::avx512::scores_transposed(
          q, off,
          h.transposed[static_cast<size_t>(head)].data() + static_cast<size_t>(r) * kTRunBytes,
          scores + static_cast<size_t>(r) * kLanes * kRun);
    return;
  }
  const uint8_t* k[kRun];
  for (int r = 0; r < n / kRun; ++r) {
    for (int t = 0; t < kRun; ++t)
      k[t] =
          h.rows[static_cast<size_t>(head)].data() + static_cast<size_t>(r * kRun + t) * kRowBytes;
    vec::avx512::attention_scores_q8(kLanes, q, kHeadDim, k, kRun,
                                     scores + static_cast<size_t>(r) * kLanes * kRun, nullptr);
  }
}

void BM_KeyScores(benchmark::State& state) {
  if (!cpu::supports(cpu::KernelLevel::Avx512Vnni))
    return state.SkipWithError("no AVX-512 VNNI on this CPU");
  const int layout = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const Heads h = make_heads(n);
  std::vector<float> scores(static_cast<size_t>(n) * kLanes), reference(scores.size());
  for (int head = 0; head < kKvHeads; ++head) {  // both layouts give the same scores
    head_scores(h, head, n, 0, reference.data());
    head_scores(h, head, n, layout, scores.data());
    for (size_t i = 0; i < scores.size(); ++i)
      if (std::fabs(scores[i] - reference[i]) > 1e-4f * (1.0f + std::fabs(reference[i])))
        return state.SkipWithError("the transposed layout's scores differ from the engine's");
  }
  for (auto _ : state) {
    for (int head = 0; head < kKvHeads; ++head) head_scores(h, head, n, layout, scores.data());
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t{n} * kKvHeads *
                          static_cast<int64_t>(kRowBytes));
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

BENCHMARK(BM_KeyScores)
    ->ArgNames({"layout", "rows"})
    ->ArgsProduct({{0, 1, 2, 3}, {256, 8192}})
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", min_of);

}  // namespace
}  // namespace tangram

BENCHMARK_MAIN();
