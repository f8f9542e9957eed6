// The serialised form of a session at rest: its paged KV cache, exactly as stored (F16/F32 rows,
// per-head lengths and kept positions after compression), and its token history, so that the
// session can leave memory (host spill, disk, a shared store) and come back bit for bit.
//
// Layout, version 2 (version 1 wrote one block per (layer, group): its groups could not span
// layers; its blobs are refused, and the session recomputed). Integers are little-endian, fields
// are packed (no padding: every byte is covered by a checksum), checksums are XXH3-64.
//
//   Header, 88 bytes
//     [0, 8)    magic "TGKVSESS"
//     [8, 12)   u32 format version (2)
//     [12, 16)  u32 KV element type: 0 = F32, 1 = F16
//     [16, 24)  u64 model fingerprint          (see session_fingerprint.h)
//     [24, 32)  u64 profile fingerprint
//     [32, 40)  u64 head-group map fingerprint
//     [40, 60)  i32 n_layers, n_head, n_kv_head, head_dim, head_dim_v
//     [60, 64)  u32 element bytes (4 or 2)
//     [64, 72)  i64 n_positions: positions every layer holds = tokens in the history
//     [72, 80)  i64 n_groups: group blocks that follow (every head group, see head_group_map.h)
//     [80, 88)  u64 checksum of [0, 80)
//   Token block
//     i32 tokens[n_positions]
//     u64 checksum of the tokens' bytes
//   Group block, one per head group, in flat group order (a group may hold heads of any layers)
//     i32 group, i32 n_members, u64 payload_bytes
//     payload: for each member, in page-column order
//       i32 layer, i32 kv_head, i64 length, i64 n_kept, i64 tail_pos0
//       i32 kept_pos[n_kept]                 positions of entries [0, n_kept), ascending;
//                                            entries from n_kept hold tail_pos0, tail_pos0+1, ...
//       keys   [length][head_dim]   elements (after RoPE, as stored)
//       values [length][head_dim_v] elements
//     u64 checksum of the block's bytes before it (from `group` to the payload's end)
//   Trailer, 32 bytes
//     magic "TGKVTAIL", u64 total bytes of the blob, u64 copy of the header checksum,
//     u64 checksum of the trailer's first 24 bytes
//
// Page size is not part of the format: a session restores into pools of any page_tokens whose
// group size fits the map, as long as the element type and head sizes are equal.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "kv/block_pool.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "store/session_fingerprint.h"

namespace tangram {

inline constexpr uint32_t kSessionFormatVersion = 2;

// Serialises a session at rest. Errors: the token count differs from a layer's positions (a
// cache in the middle of a step), the fingerprint's KV type or group-map fingerprint does not
// describe this cache, or host memory runs out.
Result<std::string> encode_session(const PagedKvCache& cache, std::span<const int32_t> tokens,
                                   const SessionFingerprint& fingerprint);

// The same into `out` (resized; its capacity is reused, which saves the page faults of a fresh
// allocation when a caller encodes many sessions through one buffer).
Status encode_session_into(const PagedKvCache& cache, std::span<const int32_t> tokens,
                           const SessionFingerprint& fingerprint, std::string& out);

// Bytes encode_session would produce (for budgeting a tier without encoding).
size_t encoded_session_bytes(const PagedKvCache& cache);

struct DecodedSession {
  std::unique_ptr<PagedKvCache> cache;
  std::vector<int32_t> tokens;  // [n_positions]
};

// Rebuilds the session in a fresh cache of `capacity` positions with pages from `pool`, laid out
// by `map`. Everything is checked before any page is taken: structure and bounds ("session
// truncated at byte N: ..."), every checksum ("checksum of group 7 fails"), the
// fingerprints ("model fingerprint differs ..."), the shape, the group layout, each head's lengths
// and positions, and the pool's free pages. On error nothing is allocated and the pool is
// unchanged.
Result<DecodedSession> decode_session(std::string_view bytes, const SessionFingerprint& expected,
                                      BlockPool& pool, std::shared_ptr<const HeadGroupMap> map,
                                      const KvShape& shape, int64_t capacity);

// What a blob holds, read from its header and token block only (both checksummed); no pool
// needed. For listing sessions found on disk after a restart.
struct SessionSummary {
  SessionFingerprint fingerprint;
  KvShape shape;
  int64_t n_groups = 0;
  std::vector<int32_t> tokens;  // [n_positions]
};
Result<SessionSummary> inspect_session(std::string_view bytes);

// How many bytes from a blob's start inspect_session reads (header and token block), from the
// first kSessionHeaderBytes of it (the header, checksum verified).
inline constexpr size_t kSessionHeaderBytes = 88;
Result<size_t> session_summary_bytes(std::string_view header);

}  // namespace tangram
