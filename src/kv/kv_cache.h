// The key/value store of one sequence.
//
// The interface is shaped so that storages with different layouts stand behind it: the
// contiguous cache, and the paged cache (kv/paged_kv_cache.h) with pages per KV-head group where
// each KV head keeps its own length (after per-head compression). That is why
//  - positions and lengths are separate: n_positions() counts the token positions the sequence
//    has consumed (the RoPE position of the next token), while length(layer, kv_head) counts the
//    entries one head actually stores;
//  - a cache does not compute attention: it describes where each head's entries are
//    (head_view(), kv_head_view.h) and which heads share pages (head_groups()), and the
//    attention module (src/attention/) reads any layout through those views, one sequence or a
//    whole batch of them in one call.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace tangram {

class HeadGroupMap;
struct KvHeadView;

// Element type of stored keys and values (row layouts in kv_row.h).
enum class KvType { F32, F16, Q8_0 };
std::string_view kv_type_name(KvType t);

struct KvShape {
  int n_layers = 0;
  int n_head = 0;  // query heads; a multiple of n_kv_head (GQA)
  int n_kv_head = 0;
  int head_dim = 0;    // key (and query) head size
  int head_dim_v = 0;  // value head size
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  virtual const KvShape& shape() const = 0;
  virtual KvType type() const = 0;
  // Most positions this cache can ever hold.
  virtual int64_t capacity() const = 0;
  // Positions consumed so far; the next write starts here.
  virtual int64_t n_positions() const = 0;
  // Entries stored for one (layer, KV head).
  virtual int64_t length(int layer, int kv_head) const = 0;

  // Makes room for positions [0, n_total). Errors when n_total exceeds capacity() or memory
  // runs out; nothing is changed then. Call before write() for the positions to be written.
  virtual Status reserve(int64_t n_total) = 0;

  // Appends keys and values of n consecutive positions pos0 .. pos0+n-1 for one layer.
  // pos0 must be the layer's current end (n_positions() before the step; no gaps) and
  // reserve(pos0 + n) must have succeeded; otherwise an Error and nothing is written.
  //   k: [n][n_kv_head][head_dim]   v: [n][n_kv_head][head_dim_v]
  // n_positions() advances once the last layer has been written.
  virtual Status write(int layer, int64_t pos0, const float* k, const float* v, int64_t n) = 0;

  // Where one (layer, KV head) keeps its entries and which positions they hold; valid until
  // the next reserve(), write() or truncate(). An empty view for a head out of range.
  virtual KvHeadView head_view(int layer, int kv_head) const = 0;
  // Which heads share pages (each head alone where none do): attention walks a group's heads
  // together so each shared page is read in one sweep.
  virtual const HeadGroupMap& head_groups() const = 0;

  // Forgets every position >= n_tokens (no-op if already shorter).
  virtual void truncate(int64_t n_tokens) = 0;
  void clear() { truncate(0); }
};

}  // namespace tangram
