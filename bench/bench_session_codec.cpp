// Session serialisation and the local disk tier: encode and decode throughput (GB/s of blob) and
// disk put (write + fsync + rename + directory fsync) and get latency, for sessions of 2K and 8K
// tokens at 25% retention (32K is 4x the 8K numbers: the work is linear in the blob, and its
// 1.2 GB blob needs more memory than a shared machine should lend a benchmark).
//
// Shape of Qwen3-4B's attention: 36 layers, 32 query heads, 8 KV heads, head_dim 128, F16 rows
// (q8:1: Q8_0 rows, whose keys the pages keep as key tiles, so decode transposes them back),
// P = 16, head groups of 4 (tangram-like). Per-head kept lengths vary from 10% to 40% of the
// context (mean 25%), every kept entry with an explicit position, as compression leaves them.
// The cache is built with PagedKvCache::restore from random rows: the codec copies bytes and
// never looks at their values. The disk store lives in $TMPDIR (or /tmp).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <unistd.h>

#include "kv/paged_kv_cache.h"
#include "store/session_codec.h"
#include "store/session_disk_store.h"

namespace tangram {
namespace {

constexpr KvShape kShape{36, 32, 8, 128, 128};
constexpr int kPageTokens = 16, kGroup = 4;

struct Session {
  std::unique_ptr<BlockPool> pool;  // holds the original and one decoded copy
  std::shared_ptr<const HeadGroupMap> map;
  std::unique_ptr<PagedKvCache> cache;
  std::vector<int32_t> tokens;  // [n]
  SessionFingerprint fp;
  std::string blob;
};

// Random rows of the type (Q8_0 blocks get finite scales: decoding checks nothing, but random
// bytes would make half of them NaN, which no real cache holds).
void fill_rows(std::vector<uint8_t>& rows, KvType type, std::mt19937& rng) {
  for (auto& b : rows) b = static_cast<uint8_t>(rng());
  if (type != KvType::Q8_0) return;
  for (size_t at = 0; at < rows.size(); at += kKvQ8BlockBytes) {
    rows[at] = static_cast<uint8_t>(rng());
    rows[at + 1] =
        static_cast<uint8_t>(0x1C | (rng() & 0x83));  // fp16 exponent 7: magnitudes in [2^-8, 2^-7)
  }
}

// One session per context length and KV type, built once.
Session& session(int64_t n, KvType type) {
  static std::map<std::pair<int64_t, KvType>, std::unique_ptr<Session>> cache;
  auto& slot = cache[{n, type}];
  if (slot) return *slot;
  slot = std::make_unique<Session>();
  Session& s = *slot;
  s.map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::contiguous(kShape.n_layers, kShape.n_kv_head, kGroup).value());
  const PageGeometry geo{kPageTokens, kGroup, kShape.head_dim, kShape.head_dim_v, type};
  // Room for two copies at the longest head of every group (<= 40% + a page).
  const int64_t pages = 2 * s.map->total_groups() * ((n * 2 / 5) / kPageTokens + 2);
  s.pool = BlockPool::create(geo, static_cast<size_t>(pages) * geo.page_bytes(), true).value();
  s.cache = PagedKvCache::create(kShape, n, *s.pool, s.map).value();
  std::mt19937 rng(static_cast<uint32_t>(n));
  const int n_heads = kShape.n_layers * kShape.n_kv_head;
  std::vector<std::vector<int32_t>> kept(static_cast<size_t>(n_heads));
  std::vector<std::vector<uint8_t>> keys(kept.size()), values(kept.size());
  std::vector<PagedKvCache::HeadRestore> heads(kept.size());
  std::vector<int32_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  for (size_t i = 0; i < kept.size(); ++i) {
    const double share = 0.10 + 0.30 * static_cast<double>(i % 7) / 6.0;  // mean 0.25
    const auto len = static_cast<int64_t>(share * static_cast<double>(n));
    std::sample(all.begin(), all.end(), std::back_inserter(kept[i]), len, rng);
    keys[i].resize(static_cast<size_t>(len) * geo.key_row_bytes());
    values[i].resize(static_cast<size_t>(len) * geo.value_row_bytes());
    fill_rows(keys[i], type, rng);
    fill_rows(values[i], type, rng);
    heads[i] = {len, kept[i], n, keys[i].data(), values[i].data()};
  }
  const Status st = s.cache->restore(n, heads);
  if (!st.ok()) std::fprintf(stderr, "restore: %s\n", st.message().c_str());
  s.tokens.resize(static_cast<size_t>(n));
  for (auto& t : s.tokens) t = static_cast<int32_t>(rng() % 150000);
  s.fp = SessionFingerprint{1, type, 2, group_map_fingerprint(*s.map)};
  s.blob = encode_session(*s.cache, s.tokens, s.fp).value();
  return s;
}

// The session a benchmark's arguments (positions, q8) name.
Session& session_of(const benchmark::State& state) {
  return session(state.range(0), state.range(1) ? KvType::Q8_0 : KvType::F16);
}

void BM_Encode(benchmark::State& state) {
  Session& s = session_of(state);
  for (auto _ : state) {
    auto blob = encode_session(*s.cache, s.tokens, s.fp);
    benchmark::DoNotOptimize(blob);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(s.blob.size()));
  state.counters["blob_MB"] = static_cast<double>(s.blob.size()) / 1e6;
}

// Through one reused buffer: no fresh allocation (and its page faults) per session.
void BM_EncodeReused(benchmark::State& state) {
  Session& s = session_of(state);
  std::string out;
  for (auto _ : state) {
    const Status st = encode_session_into(*s.cache, s.tokens, s.fp, out);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(s.blob.size()));
}

void BM_Decode(benchmark::State& state) {
  Session& s = session_of(state);
  for (auto _ : state) {
    auto got = decode_session(s.blob, s.fp, *s.pool, s.map, kShape, state.range(0));
    if (!got.ok()) state.SkipWithError(got.message().c_str());
    benchmark::DoNotOptimize(got);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(s.blob.size()));
  state.counters["blob_MB"] = static_cast<double>(s.blob.size()) / 1e6;
}

SessionDiskStore& store() {
  static std::unique_ptr<SessionDiskStore> s = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("tangram-bench-sessions-" + std::to_string(::getpid()));
    return SessionDiskStore::open(dir, uint64_t{8} << 30).value();
  }();
  return *s;
}

void BM_DiskPut(benchmark::State& state) {
  Session& s = session_of(state);
  const std::string id =
      "bench-" + std::to_string(state.range(0)) + "-" + std::to_string(state.range(1));
  for (auto _ : state) {
    const Status st = store().put(id, s.blob);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(s.blob.size()));
}

void BM_DiskGet(benchmark::State& state) {
  Session& s = session_of(state);
  const std::string id =
      "bench-" + std::to_string(state.range(0)) + "-" + std::to_string(state.range(1));
  if (!store().contains(id) && !store().put(id, s.blob).ok()) state.SkipWithError("put failed");
  for (auto _ : state) {
    auto blob = store().get(id);
    if (!blob.ok()) state.SkipWithError(blob.message().c_str());
    benchmark::DoNotOptimize(blob);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(s.blob.size()));
}

BENCHMARK(BM_Encode)
    ->ArgsProduct({{2048, 8192}, {0, 1}})
    ->ArgNames({"positions", "q8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_EncodeReused)
    ->ArgsProduct({{2048, 8192}, {0, 1}})
    ->ArgNames({"positions", "q8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Decode)
    ->ArgsProduct({{2048, 8192}, {0, 1}})
    ->ArgNames({"positions", "q8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DiskPut)
    ->ArgsProduct({{2048, 8192}, {0, 1}})
    ->ArgNames({"positions", "q8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DiskGet)
    ->ArgsProduct({{2048, 8192}, {0, 1}})
    ->ArgNames({"positions", "q8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tangram

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(tangram::store().dir(), ec);
  return 0;
}
