// The key/value store of one sequence, and the attention computed over it.
//
// The interface is shaped so that storages with different layouts stand behind it: the
// contiguous cache, and the paged cache (kv/paged_kv_cache.h) with pages per KV-head group where
// each KV head keeps its own length (after per-head compression). That is why
//  - positions and lengths are separate: n_positions() counts the token positions the sequence
//    has consumed (the RoPE position of the next token), while length(layer, kv_head) counts the
//    entries one head actually stores;
//  - attention is a method of the storage, so a paged implementation supplies its own paged
//    attention kernel and the model never touches the layout. A step over many sequences goes
//    through BatchedAttention (batched_attention.h), which asks each cache for its paged form
//    (as_paged) to run them all in one call, and otherwise calls attend() per cache.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/result.h"
#include "common/thread_pool.h"

namespace tangram {

class PagedKvCache;

// Element type of stored keys and values (row layouts in kv_row.h).
enum class KvType { F32, F16, Q8_0 };
std::string_view kv_type_name(KvType t);

struct KvShape {
  int n_layers = 0;
  int n_head = 0;     // query heads; a multiple of n_kv_head (GQA)
  int n_kv_head = 0;
  int head_dim = 0;   // key (and query) head size
  int head_dim_v = 0; // value head size
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

  // Causal attention of n queries at positions pos0 .. pos0+n-1 over this layer's stored
  // entries (query at position p sees entries at positions <= p), after write() of the same
  // positions. Query head h reads KV head h / (n_head / n_kv_head); scores are scaled by
  // 1/sqrt(head_dim) and normalised with a max-subtracted softmax.
  //   q: [n][n_head][head_dim]   out: [n][n_head][head_dim_v]
  virtual void attend(int layer, const float* q, int64_t n, int64_t pos0, float* out,
                      ThreadPool& pool) const = 0;

  // Forgets every position >= n_tokens (no-op if already shorter).
  virtual void truncate(int64_t n_tokens) = 0;
  void clear() { truncate(0); }

  // This cache as pages of a block pool, for attention batched across sequences; null for
  // layouts that only attend() on their own.
  virtual const PagedKvCache* as_paged() const { return nullptr; }
};

}  // namespace tangram
