#include "store/session_codec.h"

#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include <xxhash.h>

#include "kv/kv_row.h"
#include "store/byte_io.h"

namespace tangram {

namespace {

constexpr std::string_view kMagic = "TGKVSESS";
constexpr std::string_view kTrailerMagic = "TGKVTAIL";
constexpr size_t kHeaderFields = 80;  // header bytes before its checksum
constexpr size_t kHeaderBytes = kSessionHeaderBytes;
constexpr size_t kBlockPrefix = 16;  // i32 group, i32 n_members, u64 payload_bytes
constexpr size_t kHeadFields = 32;  // i32 layer, i32 kv_head, i64 length, i64 n_kept, i64 tail_pos0
constexpr size_t kChecksumBytes = 8;
constexpr size_t kTrailerFields = 24;
constexpr size_t kTrailerBytes = 32;

size_t sz(int64_t n) { return static_cast<size_t>(n); }

uint64_t checksum(const void* p, size_t n) { return XXH3_64bits(p, n); }
uint64_t checksum(std::string_view s) { return checksum(s.data(), s.size()); }

// The header's KV type code and its check field: the bytes of one element (F32, F16) or of one
// 32-element block (Q8_0). Readers of an older build refuse an unknown code, so no format
// version is spent on a new type.
uint32_t kv_type_code(KvType t) {
  switch (t) {
    case KvType::F32:
      return 0;
    case KvType::F16:
      return 1;
    case KvType::Q8_0:
      return 2;
  }
  return 0;
}
std::optional<KvType> kv_type_of_code(uint32_t code) {
  for (const KvType t : {KvType::F32, KvType::F16, KvType::Q8_0})
    if (kv_type_code(t) == code) return t;
  return std::nullopt;
}
size_t element_bytes(KvType t) { return ggml_type_info(kv_ggml_type(t)).block_bytes; }

bool same_shape(const KvShape& a, const KvShape& b) {
  return a.n_layers == b.n_layers && a.n_head == b.n_head && a.n_kv_head == b.n_kv_head &&
         a.head_dim == b.head_dim && a.head_dim_v == b.head_dim_v;
}

std::string shape_text(const KvShape& s) {
  return fmt::format("{} layers, {} heads, {} KV heads, head sizes {}/{}", s.n_layers, s.n_head,
                     s.n_kv_head, s.head_dim, s.head_dim_v);
}

// Payload bytes of one group block (its heads' fields, positions and rows).
size_t group_payload_bytes(const PagedKvCache& cache, int flat_group) {
  const HeadGroupMap& map = cache.head_groups();
  const size_t row =
      cache.pool().geometry().key_row_bytes() + cache.pool().geometry().value_row_bytes();
  size_t n = 0;
  for (const int f : map.members(flat_group)) {
    const KvHeadView v = cache.head_view(map.layer_of_head(f), map.kv_head_of(f));
    n += kHeadFields + sz(v.n_kept) * sizeof(int32_t) + sz(v.length) * row;
  }
  return n;
}

struct Header {
  SessionFingerprint fingerprint;
  KvShape shape;
  int64_t n_positions = 0;
  int64_t n_groups = 0;
  uint64_t checksum = 0;
};

Result<Header> read_header(ByteReader& r, std::string_view blob) {
  TG_ASSIGN(const std::string_view magic, r.take(kMagic.size(), "the magic"));
  if (magic != kMagic) return make_error("not a Tangram session (bad magic at byte 0)");
  uint32_t version = 0;
  TG_TRY(r.get(version, "the format version"));
  if (version != kSessionFormatVersion)
    return make_error(
        "session format version {} (this build reads {}{}); the session must be recomputed",
        version, kSessionFormatVersion,
        version < kSessionFormatVersion ? ", whose head groups may span layers" : "");
  TG_TRY(r.need(kHeaderBytes - r.pos(), "the header"));
  uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + kHeaderFields, sizeof(stored));
  if (checksum(blob.substr(0, kHeaderFields)) != stored)
    return make_error("checksum of the header fails");
  Header h;
  uint32_t type_code = 0, elem = 0;
  TG_TRY(r.get(type_code, "the KV type"));
  TG_TRY(r.get(h.fingerprint.model, "the model fingerprint"));
  TG_TRY(r.get(h.fingerprint.profile, "the profile fingerprint"));
  TG_TRY(r.get(h.fingerprint.group_map, "the map fingerprint"));
  int32_t dims[5] = {};
  for (int32_t& d : dims) TG_TRY(r.get(d, "the shape"));
  TG_TRY(r.get(elem, "the element size"));
  TG_TRY(r.get(h.n_positions, "the position count"));
  TG_TRY(r.get(h.n_groups, "the group count"));
  TG_TRY(r.get(h.checksum, "the header checksum"));
  const std::optional<KvType> type = kv_type_of_code(type_code);
  if (!type) return make_error("session header: unknown KV element type code {}", type_code);
  h.fingerprint.kv_type = *type;
  if (elem != element_bytes(h.fingerprint.kv_type))
    return make_error("session header: {}-byte elements for KV type {}", elem,
                      kv_type_name(h.fingerprint.kv_type));
  h.shape = KvShape{dims[0], dims[1], dims[2], dims[3], dims[4]};
  if (h.shape.n_layers < 1 || h.shape.n_head < 1 || h.shape.n_kv_head < 1 || h.shape.head_dim < 1 ||
      h.shape.head_dim_v < 1)
    return make_error("session header: bad shape ({})", shape_text(h.shape));
  TG_TRY(check_kv_row_dims(h.fingerprint.kv_type, h.shape.head_dim, h.shape.head_dim_v));
  if (h.n_positions < 0 || h.n_positions > std::numeric_limits<int32_t>::max())
    return make_error("session header: {} positions", h.n_positions);
  if (h.n_groups < 1) return make_error("session header: {} head groups", h.n_groups);
  return h;
}

// n was checked to be in [0, 2^31 - 1] by read_header, so n * 4 cannot overflow.
Result<std::vector<int32_t>> read_tokens(ByteReader& r, int64_t n) {
  TG_ASSIGN(const std::string_view bytes, r.take(sz(n) * sizeof(int32_t), "the token history"));
  uint64_t stored = 0;
  TG_TRY(r.get(stored, "the token checksum"));
  if (checksum(bytes) != stored) return make_error("checksum of the token history fails");
  std::vector<int32_t> tokens;
  try {
    tokens.resize(sz(n));
  } catch (const std::bad_alloc&) {
    return make_error("session: out of host memory for {} tokens", n);
  }
  if (n > 0) std::memcpy(tokens.data(), bytes.data(), bytes.size());
  return tokens;
}

// One group block's heads, pointing into the blob (kept positions copied: they are unaligned).
Status read_group(ByteReader& r, std::string_view blob, const HeadGroupMap& map, int flat_group,
                  size_t key_row, size_t value_row, std::vector<PagedKvCache::HeadRestore>& heads,
                  std::vector<std::vector<int32_t>>& kept) {
  const std::span<const int> members = map.members(flat_group);
  const std::string where = fmt::format("group {}", flat_group);
  const size_t start = r.offset();
  int32_t got_group = 0, got_members = 0;
  uint64_t payload_bytes = 0;
  TG_TRY(r.get(got_group, where));
  TG_TRY(r.get(got_members, where));
  TG_TRY(r.get(payload_bytes, where));
  if (payload_bytes > r.remaining() || r.remaining() - payload_bytes < kChecksumBytes)
    return make_error("session truncated at byte {}: {} needs {} bytes from byte {}", blob.size(),
                      where, payload_bytes + kChecksumBytes, r.offset());
  uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + r.offset() + payload_bytes, sizeof(stored));
  if (checksum(blob.substr(start, kBlockPrefix + payload_bytes)) != stored)
    return make_error("checksum of {} fails", where);
  if (got_group != flat_group || got_members != static_cast<int32_t>(members.size()))
    return make_error("session: block at byte {} holds group {} of {} heads, expected {} of {}",
                      start, got_group, got_members, where, members.size());
  const size_t payload_at = r.offset();
  TG_ASSIGN(const std::string_view payload, r.take(payload_bytes, where));
  TG_TRY(r.get(stored, where));
  ByteReader p(payload, payload_at, blob.size());
  for (const int f : members) {
    const int layer = map.layer_of_head(f), h = map.kv_head_of(f);
    const std::string head_where = fmt::format("{} layer {} head {}", where, layer, h);
    int32_t got_layer = 0, kv_head = 0;
    int64_t length = 0, n_kept = 0, tail_pos0 = 0;
    TG_TRY(p.get(got_layer, head_where));
    TG_TRY(p.get(kv_head, head_where));
    TG_TRY(p.get(length, head_where));
    TG_TRY(p.get(n_kept, head_where));
    TG_TRY(p.get(tail_pos0, head_where));
    if (got_layer != layer || kv_head != h)
      return make_error("session: {} holds layer {} KV head {} in its place", head_where, got_layer,
                        kv_head);
    // Bounds before any multiplication: every entry needs at least a key and a value row.
    if (length < 0 || n_kept < 0 || n_kept > length ||
        sz(length) > p.remaining() / (key_row + value_row))
      return make_error(
          "session: {} claims {} entries ({} with explicit positions) in a block of {} "
          "bytes",
          head_where, length, n_kept, payload.size());
    const auto i = static_cast<size_t>(f);
    TG_ASSIGN(const std::string_view pos_bytes, p.take(sz(n_kept) * sizeof(int32_t), head_where));
    TG_ASSIGN(const std::string_view keys, p.take(sz(length) * key_row, head_where));
    TG_ASSIGN(const std::string_view values, p.take(sz(length) * value_row, head_where));
    try {
      kept[i].resize(sz(n_kept));
    } catch (const std::bad_alloc&) {
      return make_error("session: out of host memory for the positions of {}", head_where);
    }
    if (n_kept > 0) std::memcpy(kept[i].data(), pos_bytes.data(), pos_bytes.size());
    PagedKvCache::HeadRestore& hr = heads[i];
    hr.length = length;
    hr.kept_pos = kept[i];
    hr.tail_pos0 = tail_pos0;
    hr.keys = reinterpret_cast<const uint8_t*>(keys.data());
    hr.values = reinterpret_cast<const uint8_t*>(values.data());
  }
  if (p.remaining() != 0)
    return make_error("session: {} has {} bytes past its heads", where, p.remaining());
  return Status::Ok();
}

Status read_trailer(ByteReader& r, std::string_view blob, uint64_t header_checksum) {
  const size_t start = r.offset();
  TG_TRY(r.need(kTrailerBytes, "the trailer"));
  TG_ASSIGN(const std::string_view magic, r.take(kTrailerMagic.size(), "the trailer"));
  uint64_t total = 0, header_copy = 0, stored = 0;
  TG_TRY(r.get(total, "the trailer"));
  TG_TRY(r.get(header_copy, "the trailer"));
  TG_TRY(r.get(stored, "the trailer"));
  if (checksum(blob.substr(start, kTrailerFields)) != stored)
    return make_error("checksum of the trailer fails");
  if (magic != kTrailerMagic) return make_error("session: no trailer at byte {}", start);
  if (header_copy != header_checksum)
    return make_error("session: the trailer belongs to another header");
  if (total != blob.size())
    return make_error("session: the trailer says {} bytes, the blob has {}", total, blob.size());
  if (r.remaining() != 0) return make_error("session: {} bytes after the trailer", r.remaining());
  return Status::Ok();
}

}  // namespace

size_t encoded_session_bytes(const PagedKvCache& cache) {
  size_t n =
      kHeaderBytes + sz(cache.n_positions()) * sizeof(int32_t) + kChecksumBytes + kTrailerBytes;
  for (int fg = 0; fg < cache.head_groups().total_groups(); ++fg)
    n += kBlockPrefix + group_payload_bytes(cache, fg) + kChecksumBytes;
  return n;
}

Result<std::string> encode_session(const PagedKvCache& cache, std::span<const int32_t> tokens,
                                   const SessionFingerprint& fingerprint) {
  std::string out;
  TG_TRY(encode_session_into(cache, tokens, fingerprint, out));
  return out;
}

Status encode_session_into(const PagedKvCache& cache, std::span<const int32_t> tokens,
                           const SessionFingerprint& fingerprint, std::string& out) {
  const KvShape& shape = cache.shape();
  const int64_t n = cache.n_positions();
  if (static_cast<int64_t>(tokens.size()) != n)
    return make_error("encode session: {} tokens for a cache of {} positions", tokens.size(), n);
  for (int l = 0; l < shape.n_layers; ++l)
    if (cache.layer_positions(l) != n)
      return make_error(
          "encode session: layer {} holds {} positions, the last holds {} (a step in "
          "progress)",
          l, cache.layer_positions(l), n);
  if (fingerprint.kv_type != cache.type())
    return make_error("encode session: the fingerprint says {} elements, the cache stores {}",
                      kv_type_name(fingerprint.kv_type), kv_type_name(cache.type()));
  if (fingerprint.group_map != group_map_fingerprint(cache.head_groups()))
    return make_error("encode session: the fingerprint's head-group map is not the cache's");
  const HeadGroupMap& map = cache.head_groups();
  const PageGeometry& geo = cache.pool().geometry();
  const size_t total = encoded_session_bytes(cache);
  try {
    out.resize(total);
  } catch (const std::bad_alloc&) {
    return make_error("encode session: out of host memory for {} bytes", total);
  }
  ByteWriter w(out.data());
  // Header
  w.bytes(kMagic.data(), kMagic.size());
  w.put<uint32_t>(kSessionFormatVersion);
  w.put<uint32_t>(kv_type_code(cache.type()));
  w.put<uint64_t>(fingerprint.model);
  w.put<uint64_t>(fingerprint.profile);
  w.put<uint64_t>(fingerprint.group_map);
  for (const int d :
       {shape.n_layers, shape.n_head, shape.n_kv_head, shape.head_dim, shape.head_dim_v})
    w.put<int32_t>(d);
  w.put<uint32_t>(static_cast<uint32_t>(element_bytes(cache.type())));
  w.put<int64_t>(n);
  w.put<int64_t>(map.total_groups());
  const uint64_t header_checksum = checksum(out.data(), kHeaderFields);
  w.put<uint64_t>(header_checksum);
  // Tokens
  w.bytes(tokens.data(), tokens.size_bytes());
  w.put<uint64_t>(checksum(tokens.data(), tokens.size_bytes()));
  // Group blocks
  const size_t kb = geo.key_row_bytes(), vb = geo.value_row_bytes();
  for (int fg = 0; fg < map.total_groups(); ++fg) {
    const size_t start = w.pos();
    w.put<int32_t>(fg);
    w.put<int32_t>(static_cast<int32_t>(map.members(fg).size()));
    w.put<uint64_t>(group_payload_bytes(cache, fg));
    for (const int f : map.members(fg)) {
      const KvHeadView v = cache.head_view(map.layer_of_head(f), map.kv_head_of(f));
      w.put<int32_t>(map.layer_of_head(f));
      w.put<int32_t>(map.kv_head_of(f));
      w.put<int64_t>(v.length);
      w.put<int64_t>(v.n_kept);
      w.put<int64_t>(v.tail_pos0);
      w.bytes(v.kept_pos, sz(v.n_kept) * sizeof(int32_t));
      v.copy_keys(0, v.length,
                  reinterpret_cast<uint8_t*>(w.skip(sz(v.length) * kb)));  // plain rows
      v.for_each_run(0, v.length, [&](int64_t, const uint8_t*, const uint8_t* val, int64_t count) {
        w.bytes(val, sz(count) * vb);
      });
    }
    w.put<uint64_t>(checksum(w.at(start), w.pos() - start));
  }
  // Trailer
  const size_t trailer = w.pos();
  w.bytes(kTrailerMagic.data(), kTrailerMagic.size());
  w.put<uint64_t>(total);
  w.put<uint64_t>(header_checksum);
  w.put<uint64_t>(checksum(w.at(trailer), kTrailerFields));
  if (w.pos() != total)  // the size computation and the writer disagree: a bug, not bad input
    return make_error("encode session: wrote {} bytes, sized {}", w.pos(), total);
  return Status::Ok();
}

Result<SessionSummary> inspect_session(std::string_view bytes) {
  ByteReader r(bytes);
  TG_ASSIGN(const Header h, read_header(r, bytes));
  SessionSummary s;
  s.fingerprint = h.fingerprint;
  s.shape = h.shape;
  s.n_groups = h.n_groups;
  TG_ASSIGN(s.tokens, read_tokens(r, h.n_positions));
  return s;
}

Result<size_t> session_summary_bytes(std::string_view header) {
  ByteReader r(header);
  TG_ASSIGN(const Header h, read_header(r, header));
  return kHeaderBytes + sz(h.n_positions) * sizeof(int32_t) + sizeof(uint64_t);
}

Result<DecodedSession> decode_session(std::string_view bytes, const SessionFingerprint& expected,
                                      BlockPool& pool, std::shared_ptr<const HeadGroupMap> map,
                                      const KvShape& shape, int64_t capacity) {
  if (map == nullptr) return make_error("decode session: no head-group map given");
  if (group_map_fingerprint(*map) != expected.group_map)
    return make_error(
        "decode session: the head-group map given is not the one the expected "
        "fingerprint names");
  if (pool.geometry().type != expected.kv_type)
    return make_error("decode session: the pool stores {}, the expected fingerprint says {}",
                      kv_type_name(pool.geometry().type), kv_type_name(expected.kv_type));
  ByteReader r(bytes);
  TG_ASSIGN(const Header h, read_header(r, bytes));
  if (const std::string why = fingerprint_mismatch(h.fingerprint, expected); !why.empty())
    return make_error("session refused: {}", why);
  if (!same_shape(h.shape, shape))
    return make_error("session refused: shape differs (session {}; expected {})",
                      shape_text(h.shape), shape_text(shape));
  if (map->n_layers() != shape.n_layers || map->n_kv_head() != shape.n_kv_head)
    return make_error(
        "decode session: the head-group map is for {} layers x {} KV heads, the shape has {} x {}",
        map->n_layers(), map->n_kv_head(), shape.n_layers, shape.n_kv_head);
  if (h.n_groups != map->total_groups())
    return make_error("session refused: {} head groups, the map has {}", h.n_groups,
                      map->total_groups());
  if (h.n_positions > capacity)
    return make_error("session refused: {} positions exceed the capacity of {}", h.n_positions,
                      capacity);
  DecodedSession out;
  TG_ASSIGN(out.tokens, read_tokens(r, h.n_positions));
  const size_t heads_total = sz(shape.n_layers) * sz(shape.n_kv_head);
  std::vector<PagedKvCache::HeadRestore> heads;
  std::vector<std::vector<int32_t>> kept;
  try {
    heads.resize(heads_total);
    kept.resize(heads_total);
  } catch (const std::bad_alloc&) {
    return make_error("decode session: out of host memory");
  }
  const size_t kb = kv_row_bytes(expected.kv_type, shape.head_dim);
  const size_t vb = kv_row_bytes(expected.kv_type, shape.head_dim_v);
  for (int fg = 0; fg < map->total_groups(); ++fg)
    TG_TRY(read_group(r, bytes, *map, fg, kb, vb, heads, kept));
  TG_TRY(read_trailer(r, bytes, h.checksum));
  TG_ASSIGN(out.cache, PagedKvCache::create(shape, capacity, pool, std::move(map)));
  if (Status s = out.cache->restore(h.n_positions, heads); !s.ok())
    return make_error("session refused: {}", s.message());
  return out;
}

}  // namespace tangram
