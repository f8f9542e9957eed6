// Decode attention over head-group pages vs the same kernel over dense [n_kv][len][head_dim]
// arrays, and the wasted-slot fraction of each head-group size.
//
// Shape: 32 query heads, 8 KV heads, head_dim 128, F16, P = 16 tokens per page; every head holds
// `len` entries. G = 8 is the unified (vLLM) page. The paged runs use the default plan (one work
// item per head group, so a group's pages are read in one sweep). "hot" repeats one layer (its KV
// stays in cache for short lengths: len 256 is L2-resident and measures the kernel alone); "cold"
// cycles through enough layers (>= 256 MiB of KV) that every call streams its KV from DRAM, as a
// real decode step does. BM_DecodeBatch is the step of `tangram bench-model --context`: 16
// sequences x 8K entries of one layer, one decode row each, planned at run time or ahead of time.
// Every run reports "of_bw": its KV bytes per second over the machine's read bandwidth with as many
// threads (measured first, kernels/memory_bandwidth.h). The "global" rows group heads across layers
// (every layer's heads shuffled together, then cut into groups of G) at the same kept tokens, to
// compare with per-layer groups.
//
// Before the timings, main() prints the waste table: slots allocated but unused, over 36 layers
// x 8 KV heads, for equal head lengths and for per-head lengths drawn from a skewed
// (log-normal) distribution, with contiguous groups and with groups of heads sorted by length;
// and, when data/profiles is found, with the per-head retention of a real profile.
// Then the balance table (when the profile is found): the per-head kept lengths of 4 samples of
// the SnapKV Qwen3-4B profile, scaled to a 16k context, as one decode batch per layer; the
// predicted imbalance of the naive plan (one item per head group, threads take items as they
// free up) and of the ahead-of-time balanced plan (plan_attention_balanced, fixed assignment),
// and their measured times against the ideal (single-thread time / threads).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "attention/attention_kernel.h"
#include "attention/attention_planner.h"
#include "attention/balanced_plan.h"
#include "attention/dense_attention.h"
#include "attention/paged_attention.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/memory_bandwidth.h"
#include "kernels/quant.h"
#include "kv/kv_row.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kPageTokens = 16;
constexpr size_t kColdBytes = size_t{256} << 20;

ThreadPool& pool(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// The machine's read bandwidth with 1 and 2 threads (kernels/memory_bandwidth.h, measured in
// main() before the timings): every cold run reports its KV bytes per second over it ("of_bw").
double g_read_gbps[3] = {0, 0, 0};

void report_bandwidth(benchmark::State& state, int threads, double bytes_per_iteration) {
  state.SetBytesProcessed(
      static_cast<int64_t>(static_cast<double>(state.iterations()) * bytes_per_iteration));
  const double peak = g_read_gbps[std::clamp(threads, 1, 2)] * 1e9;
  if (peak > 0)
    state.counters["of_bw"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * bytes_per_iteration / peak,
                           benchmark::Counter::kIsRate);
}

size_t kv_bytes_per_layer(int64_t len) {
  return static_cast<size_t>(len) * kKvHeads * kHeadDim * 2 /*K,V*/ * 2 /*F16*/;
}

int layers_for(int64_t len, bool cold) {
  if (!cold) return 1;
  return static_cast<int>(
      std::max<size_t>(2, (kColdBytes + kv_bytes_per_layer(len) - 1) / kv_bytes_per_layer(len)));
}

// The dense baseline's arrays get the same memory treatment as the pool's arena: 2 MiB aligned,
// advised for huge pages, written once before timing.
struct HugeArray {
  static constexpr size_t kAlign = size_t{2} << 20;
  uint16_t* data = nullptr;
  size_t bytes = 0;
  explicit HugeArray(size_t n) : bytes((n * sizeof(uint16_t) + kAlign - 1) / kAlign * kAlign) {
    data = static_cast<uint16_t*>(::operator new (bytes, std::align_val_t{kAlign}));
#if defined(__linux__)
    (void)madvise(data, bytes, MADV_HUGEPAGE);
#endif
    std::fill_n(reinterpret_cast<char*>(data), bytes, 0);
  }
  ~HugeArray() { ::operator delete (data, std::align_val_t{kAlign}); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// args: len, threads, cold
void BM_DecodeContiguous(benchmark::State& state) {
  const int64_t len = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const int n_layers = layers_for(len, state.range(2) != 0);
  const KvShape shape{n_layers, kHeads, kKvHeads, kHeadDim, kHeadDim};
  // One layer of random F16 rows, copied to every layer: [n_kv][len][head_dim] each.
  const size_t per_layer = static_cast<size_t>(len) * kKvHeads * kHeadDim;
  HugeArray k_mem(per_layer * static_cast<size_t>(n_layers)),
      v_mem(per_layer * static_cast<size_t>(n_layers));
  uint16_t* k = k_mem.data;
  uint16_t* v = v_mem.data;
  {
    const auto src = random_floats(per_layer, 1);
    quantize_row(GgmlType::F16, src.data(), k, static_cast<int64_t>(per_layer));
    quantize_row(GgmlType::F16, src.data(), v, static_cast<int64_t>(per_layer));
    for (int l = 1; l < n_layers; ++l) {
      std::copy_n(k, per_layer, k + per_layer * static_cast<size_t>(l));
      std::copy_n(v, per_layer, v + per_layer * static_cast<size_t>(l));
    }
  }
  const auto q = random_floats(kHeads * kHeadDim, 2);
  std::vector<float> out(kHeads * kHeadDim);
  AttentionWorkspace ws;
  int layer = 0;
  for (auto _ : state) {
    const size_t off = per_layer * static_cast<size_t>(layer);
    const DenseKv kv{k + off, v + off, len, KvType::F16};
    if (!dense_attention(shape, kv, q.data(), 1, len - 1, out.data(), pool(threads), ws).ok())
      state.SkipWithError("dense attention failed");
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % n_layers;
  }
  report_bandwidth(state, threads, static_cast<double>(kv_bytes_per_layer(len)));
}

// Head groups of G over every layer's heads shuffled together (seeded): groups span layers, as
// the global clustering makes them, and a layer's heads sit in as many groups as it has heads.
Result<HeadGroupMap> shuffled_global_map(int n_layers, int group) {
  std::vector<int> heads(static_cast<size_t>(n_layers) * kKvHeads);
  std::iota(heads.begin(), heads.end(), 0);
  std::shuffle(heads.begin(), heads.end(), std::mt19937(7));
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < heads.size(); i += static_cast<size_t>(group))
    groups.emplace_back(heads.begin() + static_cast<std::ptrdiff_t>(i),
                        heads.begin() + static_cast<std::ptrdiff_t>(std::min(
                                            heads.size(), i + static_cast<size_t>(group))));
  return HeadGroupMap::from_flat_groups(n_layers, kKvHeads, group, groups);
}

// args: len, threads, cold, G, scattered (pages handed out in random order, as after a while
// of serving, instead of consecutively from a fresh pool), P, global (1: groups across layers,
// shuffled_global_map; 0: contiguous per layer; every head holds len entries either way)
void BM_DecodePaged(benchmark::State& state) {
  const int64_t len = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const int n_layers = layers_for(len, state.range(2) != 0);
  const int group = static_cast<int>(state.range(3));
  const bool scattered = state.range(4) != 0;
  const int page_tokens = static_cast<int>(state.range(5));
  const bool global = state.range(6) != 0;
  const KvShape shape{n_layers, kHeads, kKvHeads, kHeadDim, kHeadDim};
  PageGeometry geo;
  geo.page_tokens = page_tokens;
  geo.group_size = group;
  geo.head_dim = kHeadDim;
  geo.head_dim_v = kHeadDim;
  geo.type = KvType::F16;
  auto map = global ? shuffled_global_map(n_layers, group)
                    : HeadGroupMap::contiguous(n_layers, kKvHeads, group);
  if (!map.ok()) return state.SkipWithError("setup failed");
  const int64_t pages = int64_t{map->total_groups()} * ((len + page_tokens - 1) / page_tokens);
  auto pool_r = BlockPool::create(geo, static_cast<size_t>(pages) * geo.page_bytes());
  if (!pool_r.ok() || !map.ok()) return state.SkipWithError("setup failed");
  if (scattered) {
    std::vector<PageId> all;
    if (!(*pool_r)->allocate((*pool_r)->total_pages(), all).ok())
      return state.SkipWithError("setup failed");
    std::shuffle(all.begin(), all.end(), std::mt19937(5));
    if (!(*pool_r)->release(all).ok()) return state.SkipWithError("setup failed");
  }
  auto cache_r = PagedKvCache::create(shape, len, **pool_r,
                                      std::make_shared<const HeadGroupMap>(std::move(map).value()));
  if (!cache_r.ok() || !(*cache_r)->reserve(len).ok()) return state.SkipWithError("reserve failed");
  PagedKvCache& cache = **cache_r;
  {
    // Token-major rows [chunk][n_kv][head_dim], written chunk by chunk.
    constexpr int64_t kChunk = 256;
    const auto rows = random_floats(static_cast<size_t>(kChunk) * kKvHeads * kHeadDim, 3);
    for (int l = 0; l < n_layers; ++l)
      for (int64_t t = 0; t < len; t += kChunk) {
        const int64_t n = std::min(kChunk, len - t);
        if (!cache.write(l, t, rows.data(), rows.data(), n).ok())
          return state.SkipWithError("write failed");
      }
  }
  const auto q = random_floats(kHeads * kHeadDim, 2);
  std::vector<float> out(kHeads * kHeadDim);
  AttentionWorkspace ws;
  AttentionItem item{&cache, q.data(), out.data(), 1, len - 1};
  int layer = 0;
  for (auto _ : state) {
    if (!paged_attention(layer, std::span(&item, 1), pool(threads), ws).ok())
      state.SkipWithError("paged attention failed");
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % n_layers;
  }
  report_bandwidth(state, threads, static_cast<double>(kv_bytes_per_layer(len)));
}

// The KV-bound decode step of `tangram bench-model --context`: one layer of `seqs` sequences of
// `len` entries per KV head each (16 x 8K: 512 MiB of F16 pages, 272 MiB of Q8_0, far beyond
// the caches), one query row per sequence, planned as the engine plans it (split 0: at run
// time, 1: ahead of time, balanced and reused). Rows are written straight into the pages
// (PagedKvCache::restore). bytes_per_second counts the stored K and V bytes read.
// args: seqs, len, threads, G, split, q8 (0: F16 pages, 1: Q8_0 pages)
void BM_DecodeBatch(benchmark::State& state) {
  const int seqs = static_cast<int>(state.range(0));
  const int64_t len = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int group = static_cast<int>(state.range(3));
  const bool ahead = state.range(4) != 0;
  const KvType type = state.range(5) != 0 ? KvType::Q8_0 : KvType::F16;
  const KvShape shape{1, kHeads, kKvHeads, kHeadDim, kHeadDim};
  PageGeometry geo;
  geo.page_tokens = kPageTokens;
  geo.group_size = group;
  geo.head_dim = kHeadDim;
  geo.head_dim_v = kHeadDim;
  geo.type = type;
  const int64_t pages_per_seq = int64_t{kKvHeads / group} * ((len + kPageTokens - 1) / kPageTokens);
  auto pool_r =
      BlockPool::create(geo, static_cast<size_t>(pages_per_seq * seqs) * geo.page_bytes());
  auto map_r = HeadGroupMap::contiguous(1, kKvHeads, group);
  if (!pool_r.ok() || !map_r.ok()) return state.SkipWithError("setup failed");
  const auto map = std::make_shared<const HeadGroupMap>(std::move(map_r).value());
  // One head's rows, [len][head_dim] in the page type, restored into every head of every sequence.
  std::vector<uint8_t> rows(static_cast<size_t>(len) * geo.key_row_bytes());
  {
    const auto src = random_floats(static_cast<size_t>(len) * kHeadDim, 4);
    for (int64_t t = 0; t < len; ++t)
      store_kv_row(type, src.data() + t * kHeadDim,
                   rows.data() + static_cast<size_t>(t) * geo.key_row_bytes(), kHeadDim);
  }
  const uint8_t* bytes = rows.data();
  std::vector<PagedKvCache::HeadRestore> heads(kKvHeads,
                                               PagedKvCache::HeadRestore{len, {}, 0, bytes, bytes});
  std::vector<std::unique_ptr<PagedKvCache>> caches;
  std::vector<std::vector<float>> q, out;  // [seqs][n_head * head_dim]
  std::vector<AttentionItem> items;
  for (int s = 0; s < seqs; ++s) {
    auto cache = PagedKvCache::create(shape, len, **pool_r, map);
    if (!cache.ok() || !(*cache)->restore(len, heads).ok())
      return state.SkipWithError("restore failed");
    caches.push_back(std::move(cache).value());
    q.push_back(random_floats(kHeads * kHeadDim, static_cast<uint32_t>(20 + s)));
    out.emplace_back(kHeads * kHeadDim);
  }
  for (int s = 0; s < seqs; ++s)
    items.push_back({caches[static_cast<size_t>(s)].get(), q[static_cast<size_t>(s)].data(),
                     out[static_cast<size_t>(s)].data(), 1, len - 1});
  AttentionPlanner planner;
  planner.set_split(ahead ? AttentionSplit::AheadOfTime : AttentionSplit::Runtime);
  AttentionWorkspace ws;
  for (auto _ : state) {
    if (!planner.begin_step(items, 1).ok() || !build_attention_batch(0, items, ws.batch).ok() ||
        !run_attention(ws.batch, planner.plan(0, ws.batch, pool(threads).size()), pool(threads), ws)
             .ok())
      state.SkipWithError("attention failed");
    benchmark::DoNotOptimize(out.data());
  }
  report_bandwidth(
      state, threads,
      static_cast<double>(len) * kKvHeads * 2.0 * static_cast<double>(geo.key_row_bytes()) * seqs);
}

// The inner loops alone, F16 against Q8_0 rows: attend_heads on one thread over 8 KV heads of
// `rows` dense entries, 4 query lanes each (one decode row of 32 query heads), head size 128,
// at kernel level `level` (0: AVX2, 1: AVX-512 VNNI where the CPU has it). CPU time, so other
// jobs on a shared machine matter less; rows 256 stay in L2 (the loop's own cost), 8192 stream
// from memory. bytes_per_second counts the stored K and V bytes read.
// args: type (0: f16, 1: q8_0), rows, level
void BM_InnerLoops(benchmark::State& state) {
  const KvType type = state.range(0) == 0 ? KvType::F16 : KvType::Q8_0;
  const int64_t rows = state.range(1);
  const auto level = state.range(2) == 0 ? cpu::KernelLevel::Avx2 : cpu::KernelLevel::Avx512Vnni;
  if (!cpu::supports(level)) return state.SkipWithError("level not supported by this CPU");
  constexpr int kLanes = kHeads / kKvHeads;
  const size_t row_bytes = kv_row_bytes(type, kHeadDim);
  std::vector<std::vector<uint8_t>> kv(2 * kKvHeads);  // [head][K, V][rows][row_bytes]
  const auto values = random_floats(static_cast<size_t>(kHeadDim), 7);
  for (auto& head : kv) {
    head.resize(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
      store_kv_row(type, values.data(), head.data() + static_cast<size_t>(r) * row_bytes, kHeadDim);
  }
  const auto q = random_floats(static_cast<size_t>(kHeads) * kHeadDim, 8);
  std::vector<KvHeadView> views(kKvHeads);
  std::vector<int64_t> limit(kLanes, rows);
  std::vector<float> m(kHeads), l(kHeads), acc(static_cast<size_t>(kHeads) * kHeadDim),
      scores(static_cast<size_t>(kHeads) * kAttentionBlock);
  std::vector<HeadLanes> heads(kKvHeads);
  for (int h = 0; h < kKvHeads; ++h) {
    KvHeadView& w = views[static_cast<size_t>(h)];
    w.k_base = kv[static_cast<size_t>(2 * h)].data();
    w.v_base = kv[static_cast<size_t>(2 * h + 1)].data();
    w.k_row_bytes = w.v_row_bytes = row_bytes;
    w.length = rows;
    const auto lane0 = static_cast<size_t>(h * kLanes);
    heads[static_cast<size_t>(h)] = HeadLanes{&w,
                                              kLanes,
                                              q.data() + lane0 * kHeadDim,
                                              limit.data(),
                                              rows,
                                              m.data() + lane0,
                                              l.data() + lane0,
                                              acc.data() + lane0 * kHeadDim,
                                              scores.data() + lane0 * kAttentionBlock};
  }
  for (auto _ : state) {
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);
    attend_heads(heads, type, kHeadDim, kHeadDim, 0, level);
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * kKvHeads * 2 *
                          static_cast<int64_t>(row_bytes));
}

void contiguous_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "threads", "cold"});
  for (const int cold : {0, 1})
    for (const int threads : {1, 2})
      for (const int64_t len : {256, 1024, 4096, 16384})
        if (len > 256 || cold == 0) b->Args({len, threads, cold});
}
void paged_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "threads", "cold", "G", "scattered", "P", "global"});
  for (const int cold : {0, 1})
    for (const int threads : {1, 2})
      for (const int64_t len : {256, 1024, 4096, 16384})
        for (const int g : {1, 2, 4, 8})
          for (const int scattered : {0, 1})
            if ((len > 256 || cold == 0) && (scattered == 0 || cold == 1))
              b->Args({len, threads, cold, g, scattered, kPageTokens, 0});
  // Larger pages: longer contiguous runs per head when pages are scattered.
  for (const int g : {1, 2, 4, 8}) b->Args({16384, 1, 1, g, 1, 64, 0});
  // Groups across layers at equal kept tokens (compare with the global = 0 rows above).
  for (const int threads : {1, 2})
    for (const int64_t len : {4096, 16384})
      for (const int g : {2, 4, 8}) b->Args({len, threads, 1, g, 1, kPageTokens, 1});
}

// With --benchmark_repetitions, "min" is the least noisy figure on a shared machine.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

BENCHMARK(BM_DecodeContiguous)
    ->Apply(contiguous_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->ComputeStatistics("min", min_of);
BENCHMARK(BM_DecodePaged)
    ->Apply(paged_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->ComputeStatistics("min", min_of);
BENCHMARK(BM_InnerLoops)
    ->ArgNames({"q8", "rows", "avx512"})
    ->ArgsProduct({{0, 1}, {256, 8192}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", min_of);
BENCHMARK(BM_DecodeBatch)
    ->ArgNames({"seqs", "len", "threads", "G", "aot", "q8"})
    ->ArgsProduct({{16}, {8192}, {1, 2}, {8, 4}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("min", min_of);

// ---- waste table ----

constexpr int kWasteLayers = 36;

using Groups = std::vector<std::vector<std::vector<int>>>;

// kept[layer][head] -> groups of heads sorted by kept length, G per group.
Groups sorted_groups(const std::vector<std::vector<int64_t>>& kept, int group) {
  Groups g(kept.size());
  for (size_t l = 0; l < kept.size(); ++l) {
    std::vector<int> heads(kKvHeads);
    std::iota(heads.begin(), heads.end(), 0);
    std::stable_sort(heads.begin(), heads.end(), [&](int a, int b) {
      return kept[l][static_cast<size_t>(a)] > kept[l][static_cast<size_t>(b)];
    });
    for (int i = 0; i < kKvHeads; i += group)
      g[l].emplace_back(heads.begin() + i, heads.begin() + std::min(kKvHeads, i + group));
  }
  return g;
}

// Fills a sequence to `context` positions, cuts each head to kept[l][h] entries and releases
// the freed pages; returns wasted / allocated slots.
double waste_fraction(const std::vector<std::vector<int64_t>>& kept, int64_t context, int group,
                      const Groups* custom, int page_tokens) {
  const KvShape shape{kWasteLayers, kKvHeads, kKvHeads, 8, 8};  // head size does not matter here
  PageGeometry geo;
  geo.page_tokens = page_tokens;
  geo.group_size = group;
  geo.head_dim = 8;
  geo.head_dim_v = 8;
  geo.type = KvType::F16;
  const int64_t pages =
      int64_t{kWasteLayers} * kKvHeads * ((context + page_tokens - 1) / page_tokens);
  auto pool_r = BlockPool::create(geo, static_cast<size_t>(pages) * geo.page_bytes());
  auto map = custom ? HeadGroupMap::from_groups(kKvHeads, group, *custom)
                    : HeadGroupMap::contiguous(kWasteLayers, kKvHeads, group);
  if (!pool_r.ok() || !map.ok()) return -1.0;
  auto cache_r = PagedKvCache::create(shape, context, **pool_r,
                                      std::make_shared<const HeadGroupMap>(std::move(map).value()));
  if (!cache_r.ok() || !(*cache_r)->reserve(context).ok()) return -1.0;
  PagedKvCache& cache = **cache_r;
  const std::vector<float> rows(static_cast<size_t>(context) * kKvHeads * 8, 0.5f);
  for (int l = 0; l < kWasteLayers; ++l) {
    if (!cache.write(l, 0, rows.data(), rows.data(), context).ok()) return -1.0;
    for (int h = 0; h < kKvHeads; ++h)
      if (!cache.set_head_length(l, h, kept[static_cast<size_t>(l)][static_cast<size_t>(h)]).ok())
        return -1.0;
  }
  cache.release_unused_pages();
  const PoolStats st = (*pool_r)->stats();
  return st.waste_fraction();
}

void print_waste_row(const char* label, const std::vector<std::vector<int64_t>>& kept,
                     int64_t context, int page_tokens = kPageTokens) {
  std::printf("%-38s", label);
  for (const int g : {1, 2, 4, 8})
    std::printf("  %6.1f%%", 100.0 * waste_fraction(kept, context, g, nullptr, page_tokens));
  for (const int g : {2, 4}) {
    const Groups sorted = sorted_groups(kept, g);
    std::printf("  %6.1f%%", 100.0 * waste_fraction(kept, context, g, &sorted, page_tokens));
  }
  std::printf("\n");
}

// Per-head retention (layers x 8) of a real profile, or empty when not found.
std::vector<std::vector<double>> profile_ratios(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return {};
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("arrays") || !j["arrays"].contains("ratio_per_head"))
    return {};
  const auto& a = j["arrays"]["ratio_per_head"];
  const auto data = a["data"].get<std::vector<double>>();
  if (data.size() != static_cast<size_t>(kWasteLayers * kKvHeads)) return {};
  std::vector<std::vector<double>> r(kWasteLayers, std::vector<double>(kKvHeads));
  for (int l = 0; l < kWasteLayers; ++l)
    for (int h = 0; h < kKvHeads; ++h)
      r[static_cast<size_t>(l)][static_cast<size_t>(h)] =
          data[static_cast<size_t>(l * kKvHeads + h)];
  return r;
}

void print_waste_table() {
  const int64_t context = 8192;
  std::printf(
      "Wasted slots (allocated but unused / allocated), %d layers x %d KV heads, P = %d, "
      "context %lld, after per-head cuts and release_unused_pages();\n"
      "'srt' = each layer's heads sorted by length before grouping (a clustering map):\n",
      kWasteLayers, kKvHeads, kPageTokens, static_cast<long long>(context));
  std::printf("%-38s  %7s  %7s  %7s  %7s  %7s  %7s\n", "per-head lengths (P = 16 unless noted)",
              "G=1", "G=2", "G=4", "G=8/uni", "G=2 srt", "G=4 srt");
  std::vector<std::vector<int64_t>> kept(kWasteLayers, std::vector<int64_t>(kKvHeads, context));
  print_waste_row("equal (8192 each)", kept, context);
  for (auto& l : kept) std::fill(l.begin(), l.end(), context - 5);
  print_waste_row("equal (8187 each)", kept, context);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> skew(std::log(0.15), 1.0);  // median 15% kept, long tail
  for (auto& l : kept)
    for (auto& k : l)
      k = std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::min(1.0, skew(rng)) *
                                                                static_cast<double>(context))),
                              1, context);
  print_waste_row("log-normal (median 15%, sigma 1)", kept, context);
  print_waste_row("log-normal, P = 64", kept, context, 64);
  const char* dir = std::getenv("TANGRAM_DATA_DIR");
  const std::filesystem::path shared = dir ? dir : "data";
  const auto ratios =
      profile_ratios(shared / "profiles/snapkv/qwen3-4b-instruct-2507/profile.json");
  if (!ratios.empty()) {
    for (size_t l = 0; l < kept.size(); ++l)
      for (size_t h = 0; h < kKvHeads; ++h)
        kept[l][h] = std::clamp<int64_t>(
            static_cast<int64_t>(std::llround(ratios[l][h] * static_cast<double>(context))), 1,
            context);
    print_waste_row("SnapKV Qwen3-4B profile (r=0.3)", kept, context);
  } else {
    std::printf("(profile %s not found: set TANGRAM_DATA_DIR)\n", shared.c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

// ---- balanced planning on a real profile ----

constexpr int kBalanceSeqs = 4;

// A batch composition: each sample's kept lengths scaled to its context.
struct BalanceBatch {
  const char* label;
  int64_t context[kBalanceSeqs];
};
constexpr BalanceBatch kBalanceBatches[] = {
    {"4 x 16k", {16384, 16384, 16384, 16384}},
    {"32k + 3 x 2k (mixed)", {32768, 2048, 2048, 2048}},
};

// Kept fraction per (sample, layer, KV head) of a profile: raw_kept ([1][samples][36][8]) over
// each sample's prompt length (sample_meta [samples][4], column 0). ratio[sample][layer][head];
// empty when the file or the arrays are missing.
std::vector<std::vector<std::vector<double>>> profile_kept_ratios(
    const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return {};
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("arrays")) return {};
  const auto& a = j["arrays"];
  if (!a.contains("raw_kept") || !a.contains("sample_meta")) return {};
  const auto shape = a["raw_kept"]["shape"].get<std::vector<size_t>>();
  const auto data = a["raw_kept"]["data"].get<std::vector<int64_t>>();
  const auto meta = a["sample_meta"]["data"].get<std::vector<int64_t>>();
  if (shape.size() != 4 || shape[2] != static_cast<size_t>(kWasteLayers) || shape[3] != kKvHeads)
    return {};
  const size_t samples = shape[1];
  if (data.size() != samples * kWasteLayers * kKvHeads || meta.size() < samples * 4) return {};
  std::vector<std::vector<std::vector<double>>> ratio(samples);
  for (size_t s = 0; s < samples; ++s) {
    const double prompt = static_cast<double>(std::max<int64_t>(1, meta[s * 4]));
    ratio[s].assign(kWasteLayers, std::vector<double>(kKvHeads));
    for (size_t l = 0; l < kWasteLayers; ++l)
      for (size_t h = 0; h < kKvHeads; ++h)
        ratio[s][l][h] = std::min(
            1.0, static_cast<double>(data[(s * kWasteLayers + l) * kKvHeads + h]) / prompt);
  }
  return ratio;
}

// One layer of the batch: a one-layer cache per sequence holding round(ratio x context) entries
// per head (positions 0 ..), queried by one decode row that sees them all.
struct BalanceLayer {
  std::vector<std::unique_ptr<PagedKvCache>> caches;
  std::vector<std::vector<float>> q, out;  // [seq][n_head * head_dim]
  std::vector<AttentionItem> items;
};

bool fill_balance_layer(const std::vector<std::vector<std::vector<double>>>& ratio,
                        const BalanceBatch& composition, int layer, BlockPool& pool,
                        const std::shared_ptr<const HeadGroupMap>& map, BalanceLayer& bl) {
  const KvShape shape{1, kHeads, kKvHeads, kHeadDim, kHeadDim};
  constexpr int64_t kChunk = 256;
  static const auto rows = random_floats(static_cast<size_t>(kChunk) * kKvHeads * kHeadDim,
                                         3);  // [chunk][n_kv][head_dim]
  bl.caches.clear();
  bl.items.clear();
  bl.q.clear();
  bl.out.clear();
  for (size_t s = 0; s < kBalanceSeqs; ++s) {
    const int64_t context = composition.context[s];
    std::vector<int64_t> len(kKvHeads);
    for (size_t h = 0; h < kKvHeads; ++h)
      len[h] = std::clamp<int64_t>(
          std::llround(ratio[s][static_cast<size_t>(layer)][h] * static_cast<double>(context)), 1,
          context);
    const int64_t longest = *std::max_element(len.begin(), len.end());
    auto cache = PagedKvCache::create(shape, context, pool, map);
    if (!cache.ok() || !(*cache)->reserve(longest).ok()) return false;
    for (int64_t t = 0; t < longest; t += kChunk)
      if (!(*cache)->write(0, t, rows.data(), rows.data(), std::min(kChunk, longest - t)).ok())
        return false;
    for (int h = 0; h < kKvHeads; ++h)
      if (!(*cache)->set_head_length(0, h, len[static_cast<size_t>(h)]).ok()) return false;
    bl.caches.push_back(std::move(cache).value());
    bl.q.push_back(random_floats(kHeads * kHeadDim, static_cast<uint32_t>(10 + s)));
    bl.out.emplace_back(kHeads * kHeadDim);
  }
  for (size_t s = 0; s < kBalanceSeqs; ++s)
    bl.items.push_back(
        {bl.caches[s].get(), bl.q[s].data(), bl.out[s].data(), 1, bl.caches[s]->n_positions() - 1});
  return true;
}

// Seconds one run of a plan takes (negative when the run fails).
double time_plan(const AttentionBatch& batch, const AttentionPlan& plan, ThreadPool& tp,
                 AttentionWorkspace& ws) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!run_attention(batch, plan, tp, ws).ok()) return -1.0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_balance_table() {
  const char* dir = std::getenv("TANGRAM_DATA_DIR");
  const std::filesystem::path shared = dir ? dir : "data";
  const auto ratio =
      profile_kept_ratios(shared / "profiles/snapkv/qwen3-4b-instruct-2507/profile.json");
  if (ratio.size() < static_cast<size_t>(kBalanceSeqs)) {
    std::printf("(balance table skipped: profile raw_kept not found under %s)\n\n", shared.c_str());
    return;
  }
  constexpr int kMeasuredLayerStep = 4;  // every 4th layer is timed (9 of 36)
  constexpr int kTimedLayers = (kWasteLayers + kMeasuredLayerStep - 1) / kMeasuredLayerStep;
  constexpr int kReps = 5;
  constexpr int kThreadCounts[] = {1, 2, 4, 8};  // timed only where the machine has the cores
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  std::printf(
      "Balanced decode-attention plans: SnapKV Qwen3-4B profile, samples 0-%d as one decode batch\n"
      "(per-head kept fraction x each sequence's context), one layer at a time; %d q heads, %d KV\n"
      "heads, head_dim %d, F16, P = %d. Imbalance = slowest thread / mean (predicted cost), mean\n"
      "and worst over 36 layers; time / ideal over %d timed layers, ideal = 1-thread time / "
      "threads.\n",
      kBalanceSeqs - 1, kHeads, kKvHeads, kHeadDim, kPageTokens, kTimedLayers);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (const int threads : kThreadCounts)
    pools.push_back(std::make_unique<ThreadPool>(threads <= cores ? threads : 1));
  std::printf("%-21s %-2s %-7s %-20s %-20s %s\n", "batch", "G", "threads", "naive mean / max",
              "balanced mean / max", "time/ideal naive  balanced");
  for (const BalanceBatch& composition : kBalanceBatches)
    for (const int group : {8, 2}) {
      PageGeometry geo;
      geo.page_tokens = kPageTokens;
      geo.group_size = group;
      geo.head_dim = kHeadDim;
      geo.head_dim_v = kHeadDim;
      geo.type = KvType::F16;
      int64_t pages = 0;
      for (const int64_t c : composition.context)
        pages += (kKvHeads / group) * (c / kPageTokens + 1);
      auto pool_r = BlockPool::create(geo, static_cast<size_t>(pages) * geo.page_bytes());
      auto map_r = HeadGroupMap::contiguous(1, kKvHeads, group);
      if (!pool_r.ok() || !map_r.ok()) return;
      const auto map = std::make_shared<const HeadGroupMap>(std::move(map_r).value());
      struct Row {
        double naive_sum = 0, naive_max = 0, bal_sum = 0, bal_max = 0;
        double t_naive = 0, t_bal = 0;
      };
      Row row[std::size(kThreadCounts)];
      double t_single = 0;
      AttentionWorkspace ws;
      AttentionPlan naive, balanced;
      for (int layer = 0; layer < kWasteLayers; ++layer) {
        BalanceLayer bl;
        if (!fill_balance_layer(ratio, composition, layer, **pool_r, map, bl) ||
            !build_attention_batch(0, bl.items, ws.batch).ok()) {
          std::printf("(balance table: setup failed)\n");
          return;
        }
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
          const int threads = kThreadCounts[i];
          Row& r = row[i];
          plan_attention_naive(ws.batch, threads, naive);
          plan_attention_balanced(ws.batch, threads, balanced);
          const double in = plan_imbalance(ws.batch, naive, threads);
          const double ib = plan_imbalance(ws.batch, balanced, threads);
          r.naive_sum += in;
          r.naive_max = std::max(r.naive_max, in);
          r.bal_sum += ib;
          r.bal_max = std::max(r.bal_max, ib);
          if (layer % kMeasuredLayerStep != 0 || threads > cores) continue;
          // Fastest of interleaved repetitions: both plans see the same machine noise.
          double tn = 1e30, tb = 1e30;
          for (int rep = 0; rep < kReps; ++rep) {
            tn = std::min(tn, time_plan(ws.batch, naive, *pools[i], ws));
            tb = std::min(tb, time_plan(ws.batch, balanced, *pools[i], ws));
          }
          r.t_naive += tn;
          r.t_bal += tb;
          if (threads == 1) t_single += std::min(tn, tb);
        }
      }
      for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
        const int threads = kThreadCounts[i];
        const Row& r = row[i];
        std::printf("%-21s %-2d %-7d %6.3f / %-11.3f %6.3f / %-11.3f", composition.label, group,
                    threads, r.naive_sum / kWasteLayers, r.naive_max, r.bal_sum / kWasteLayers,
                    r.bal_max);
        if (threads <= cores) {
          const double ideal = t_single / threads;
          std::printf("  %6.3f  %6.3f\n", r.t_naive / ideal, r.t_bal / ideal);
        } else {
          std::printf("  (not timed: %d cores)\n", cores);
        }
      }
      std::printf("%-21s    1-thread time, %d layers: %.1f ms\n", "", kTimedLayers, t_single * 1e3);
    }
  std::printf("(time: per layer the fastest of %d interleaved runs, summed)\n\n", kReps);
  std::fflush(stdout);
}

}  // namespace
}  // namespace tangram

int main(int argc, char** argv) {
  for (const int threads : {1, 2}) {
    tangram::g_read_gbps[threads] =
        tangram::measure_read_bandwidth(tangram::pool(threads), size_t{512} << 20, 3).read_gbps;
    std::printf(
        "memory read bandwidth, %d thread%s: %.1f GB/s (of_bw below is a cold run's KV bytes/s "
        "over it)\n",
        threads, threads == 1 ? "" : "s", tangram::g_read_gbps[threads]);
  }
  std::printf("\n");
  tangram::print_waste_table();
  tangram::print_balance_table();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
