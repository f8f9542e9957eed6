// Session codec: arbitrary blobs decoded into a real paged pool (and inspected without one). A
// blob is refused with a reason or restored; either way the pool stays consistent, and a restored
// cache hands all its pages back when it goes. Every block is checksummed, so random bytes would
// stop at the first checksum: when the first input byte's low bit is set, the harness rewrites the
// checksums (and the trailer's copies) over the rest of the input first, letting the fuzzer reach
// the structure, bounds and position checks behind them. Bit 1 picks an F32 pool instead of F16.
//
// TANGRAM_FUZZ_WRITE_SEEDS=<dir> writes real encoded sessions there (how fuzz/corpus/session_codec
// was made) instead of fuzzing. The head groups pair heads of different layers (format 2);
// f16_ragged_format1 is a session of the previous format, refused at its header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <xxhash.h>

#include "fuzz_support.h"
#include "store/session_codec.h"

using namespace tangram;

namespace {

constexpr KvShape kShape{2, 8, 4, 8, 16};  // layers, heads, KV heads, head_dim, head_dim_v
constexpr int64_t kCapacity = 256;

struct Setup {
  std::shared_ptr<const HeadGroupMap> map;
  std::unique_ptr<BlockPool> pool;
  SessionFingerprint fingerprint;
};

Setup make_setup(KvType type) {
  Setup s;
  // Pairs of heads from different layers (flat head = layer * 4 + kv_head): the global layout.
  s.map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_flat_groups(kShape.n_layers, kShape.n_kv_head, 2,
                                     {{0, 5}, {2, 7}, {4, 1}, {6, 3}})
          .value());
  const PageGeometry g{4, 2, kShape.head_dim, kShape.head_dim_v, type};
  s.pool = std::move(BlockPool::create(g, 64 * g.page_bytes(), false).value());
  s.fingerprint = SessionFingerprint{0x1234abcd, type, 0x77, group_map_fingerprint(*s.map)};
  return s;
}

uint64_t load_u64(const std::string& b, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
void store_u64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, sizeof v); }

// Walks the layout of session_codec.h as far as the bytes allow, rewriting each checksum.
void fix_checksums(std::string& b) {
  constexpr size_t kHeaderFields = 80, kHeaderBytes = 88;
  if (b.size() < kHeaderBytes) return;
  const uint64_t header_sum = XXH3_64bits(b.data(), kHeaderFields);
  store_u64(b, kHeaderFields, header_sum);
  const uint64_t n_positions = load_u64(b, 64), n_groups = load_u64(b, 72);
  size_t pos = kHeaderBytes;
  if (n_positions > (b.size() - pos) / 4) return;
  const size_t token_bytes = n_positions * 4;
  if (b.size() - pos - token_bytes < 8) return;
  store_u64(b, pos + token_bytes, XXH3_64bits(b.data() + pos, token_bytes));
  pos += token_bytes + 8;
  for (uint64_t g = 0; g < n_groups && g < 64; ++g) {
    if (b.size() - pos < 16) return;
    const uint64_t payload = load_u64(b, pos + 8);
    if (payload > b.size() - pos - 16 || b.size() - pos - 16 - payload < 8) return;
    store_u64(b, pos + 16 + payload, XXH3_64bits(b.data() + pos, 16 + payload));
    pos += 16 + payload + 8;
  }
  if (b.size() - pos < 32) return;
  store_u64(b, pos + 8, b.size());
  store_u64(b, pos + 16, header_sum);
  store_u64(b, pos + 24, XXH3_64bits(b.data() + pos, 24));
}

void write_seeds(const char* dir) {
  for (KvType type : {KvType::F16, KvType::F32}) {
    Setup s = make_setup(type);
    auto cache = std::move(PagedKvCache::create(kShape, kCapacity, *s.pool, s.map).value());
    const int64_t n = 6;
    TG_FUZZ_CHECK(cache->reserve(n).ok());
    std::vector<float> k(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim));
    std::vector<float> v(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim_v));
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i % 7) - 3.0f;
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 5) * 0.5f;
    for (int l = 0; l < kShape.n_layers; ++l)
      TG_FUZZ_CHECK(cache->write(l, 0, k.data(), v.data(), n).ok());
    const std::vector<int32_t> tokens{1, 42, 7, 300, 5, 2};
    // A plain session, then one as compression leaves it (kept positions, a shortened head).
    for (int ragged = 0; ragged < 2; ++ragged) {
      if (ragged) {
        const std::vector<int64_t> keep{0, 2, 5};
        TG_FUZZ_CHECK(cache->compact_head(1, 2, keep).ok());
        TG_FUZZ_CHECK(cache->compact_head(0, 1, std::vector<int64_t>{}).ok());
      }
      auto blob = encode_session(*cache, tokens, s.fingerprint);
      TG_FUZZ_CHECK(blob.ok());
      // The flag byte the harness reads first: fix checksums, and the pool's type.
      const char flags = static_cast<char>(1 | (type == KvType::F32 ? 2 : 0));
      std::ofstream(std::string(dir) + "/" + (type == KvType::F32 ? "f32" : "f16") +
                        (ragged ? "_ragged" : "_plain"),
                    std::ios::binary)
          << flags << *blob;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("TANGRAM_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Setup setups[2] = {make_setup(KvType::F16), make_setup(KvType::F32)};
  if (size < 1) return 0;
  Setup& s = setups[(data[0] >> 1) & 1];
  std::string blob(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) fix_checksums(blob);

  (void)inspect_session(blob);
  if (blob.size() >= kSessionHeaderBytes)
    (void)session_summary_bytes(std::string_view(blob).substr(0, kSessionHeaderBytes));

  const int64_t used_before = s.pool->used_pages();
  auto got = decode_session(blob, s.fingerprint, *s.pool, s.map, kShape, kCapacity);
  if (got.ok()) {
    TG_FUZZ_CHECK(got->cache->n_positions() == static_cast<int64_t>(got->tokens.size()));
    // A restored session encodes again (what the next spill does).
    TG_FUZZ_CHECK(encode_session(*got->cache, got->tokens, s.fingerprint).ok());
    got->cache.reset();
  }
  TG_FUZZ_CHECK(s.pool->used_pages() == used_before);
  TG_FUZZ_CHECK(s.pool->check_consistency().ok());
  return 0;
}
