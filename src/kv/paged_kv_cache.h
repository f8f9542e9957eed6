// KvCache of one sequence stored in pages of a shared BlockPool, one page table per head group
// and one length per (layer, KV head). A group's members may come from several layers (see
// head_group_map.h): each member has its own column, and the pages for a token position are
// allocated once per group, by whichever reserve() first needs them.
//
// A group holds pages for its longest member (counting the positions its layer has yet to write
// up to the reservation) only; shorter heads leave slots of their column unused. Heads shrink
// independently (per-head compression: set_head_length, compact_head) and release_unused_pages()
// hands whole trailing pages back. Keys are stored after RoPE, so compaction moves rows without
// touching them; each head remembers the positions of the entries it kept (only heads that were
// compacted pay for that list), which keeps causal masking and truncate() exact.
//
// fork() makes a second cache of the same entries that shares every page with this one (the n
// choices of one prompt: one prefill, n decodes). Pages are copy-on-write: before a cache writes
// into a page another cache still references (appending into the partly filled last page,
// compaction moving rows), it copies the page and drops its reference to the original, so a
// fork never changes what another reads. reserve() makes those copies for the positions it
// reserves, so that write() finds private pages; a write or compaction that was not reserved
// copies on the spot. Releasing a shared page drops one reference.
//
// The pool must outlive the cache; the cache returns every page it holds when destroyed.
// Allocation (reserve, release, truncate, destruction) goes through the pool, which expects one
// thread at a time; writes into already reserved pages of different caches may run in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/head_group_map.h"
#include "kv/kv_cache.h"
#include "kv/kv_head_view.h"

namespace tangram {

class PagedKvCache final : public KvCache {
 public:
  // Errors: shape not positive or n_head not a multiple of n_kv_head; pool head sizes differ
  // from the shape's; map for another layer or head count, or with groups larger than the
  // pool's pages; capacity outside [1, 2^31 - 1].
  static Result<std::unique_ptr<PagedKvCache>> create(const KvShape& shape, int64_t capacity,
                                                      BlockPool& pool,
                                                      std::shared_ptr<const HeadGroupMap> map);
  ~PagedKvCache() override;

  // --- KvCache ---
  const KvShape& shape() const override { return shape_; }
  KvType type() const override { return pool_->geometry().type; }
  int64_t capacity() const override { return capacity_; }
  int64_t n_positions() const override { return layer_positions_.back(); }
  // Positions written to one layer (equal on every layer between forward steps); 0 if invalid.
  int64_t layer_positions(int layer) const {
    return layer >= 0 && layer < shape_.n_layers ? layer_positions_[static_cast<size_t>(layer)] : 0;
  }
  int64_t length(int layer, int kv_head) const override;
  // Allocates, all or nothing, the pages every group needs to append up to n_total positions
  // (the most, over its members, of a member's length plus the positions its layer has not yet
  // written). Error (nothing changed) past
  // capacity or when the pool has too few free pages.
  Status reserve(int64_t n_total) override;
  // Appends rows to every head of the layer (F32 -> F16 when the pool stores F16). Error and
  // nothing written when pos0 is not the layer's position count or one of the layer's heads
  // lacks room in its group's pages.
  Status write(int layer, int64_t pos0, const float* k, const float* v, int64_t n) override;
  // Drops every entry at position >= n_tokens and frees the pages no longer needed.
  void truncate(int64_t n_tokens) override;
  // A new cache holding the same positions, entries and reservation, sharing every page (their
  // reference counts go up; nothing is copied now). Errors: out of host memory.
  Result<std::unique_ptr<PagedKvCache>> fork() const;

  // --- Capacity planning (for a scheduler) ---
  // Pages reserve(n_total) would allocate now (new pages, and copies of shared pages the
  // appends up to n_total write into); 0 when enough private pages are held.
  int64_t pages_needed(int64_t n_total) const;
  // Pages held, over all groups (a page shared with a fork counts here and in the fork).
  int64_t pages_held() const { return pages_held_; }
  // Of pages_held(), those another cache references too.
  int64_t pages_shared() const;
  // Entries stored over all (layer, KV head): this sequence's used slots.
  int64_t used_slots() const { return used_slots_; }
  // Slots of the pages held (pages_held * P * G); minus used_slots() = this sequence's waste.
  int64_t allocated_slots() const { return pages_held_ * pool_->geometry().slots_per_page(); }
  // Positions the last successful reserve() promised room for (cut by truncate()).
  int64_t reserved_positions() const { return reserved_positions_; }

  // --- Layout access (attention kernels, compression, checks) ---
  const BlockPool& pool() const { return *pool_; }
  const HeadGroupMap& head_groups() const override { return *map_; }
  // Page table of a group (flat id, see HeadGroupMap); empty when out of range.
  std::span<const PageId> group_pages(int flat_group) const;
  // Where one head's entries are and which positions they hold. Valid until the cache changes.
  KvHeadView head_view(int layer, int kv_head) const override;
  // Token position of one stored entry (entry < length(layer, kv_head)).
  int64_t entry_position(int layer, int kv_head, int64_t entry) const;

  // --- Per-head edits (for compression) ---
  // Keeps the first new_length entries of a head (new_length <= length). Pages stay until
  // release_unused_pages().
  Status set_head_length(int layer, int kv_head, int64_t new_length);
  // Keeps exactly the entries `keep` (strictly ascending indices < length) of a head, moved to
  // the front in that order, with their positions. Pages stay until release_unused_pages().
  Status compact_head(int layer, int kv_head, std::span<const int64_t> keep);
  // Returns to the pool, in bulk, the trailing pages of each group (of those touching `layer`, or
  // all) beyond what its members need: the most, over every member in any layer, of its length
  // plus the reserved positions its layer has yet to write. Returns the number of pages released.
  int64_t release_unused_pages(int layer);
  int64_t release_unused_pages();

  // --- Re-positioning (a conversation past the context: llama.cpp's context shift) ---
  // Rotates n key rows [n][head_dim], stored after RoPE, back by delta positions (RoPE of
  // -delta on the rotated dimensions); the model knows its RoPE, the cache does not.
  using KeyRotation = std::function<void(float* keys, int64_t n, int64_t delta)>;
  // Forgets positions [from, to) of every head and moves the later ones down by to - from: their
  // entries keep their values and their keys are rotated by `rotate`, so attention sees them as
  // if written at their new positions (what they attended to when written is not recomputed).
  // Compressed heads keep exactly the entries they held outside [from, to). Shared pages written
  // are copied first (copy-on-write); freed trailing pages go back to the pool. Only between
  // steps (every layer at the same position count). Errors (nothing changed, except on running
  // out of memory half way): a range not within [0, n_positions) or empty.
  Status remove_positions(int64_t from, int64_t to, const KeyRotation& rotate);

  // --- Restore (a serialised session coming back, see session_codec.h) ---
  // One head's saved state, as head_view() describes it, with its rows packed.
  struct HeadRestore {
    int64_t length = 0;                 // entries
    std::span<const int32_t> kept_pos;  // [n_kept] ascending positions of entries [0, n_kept)
    int64_t tail_pos0 = 0;              // position of entry n_kept (consecutive from there)
    const uint8_t* keys = nullptr;      // [length][key_row_bytes] in the pool's element type
    const uint8_t* values = nullptr;    // [length][value_row_bytes]
  };
  // Fills an empty cache with n_positions positions on every layer and the given heads,
  // [n_layers][n_kv_head], taking every group's pages from the pool in one allocation. All or
  // nothing: an error, and nothing changed, when the cache already holds positions, a head's
  // state is inconsistent (n_kept > length, positions not strictly ascending, not below
  // tail_pos0, or reaching past n_positions), n_positions exceeds capacity, or the pool has too
  // few free pages.
  Status restore(int64_t n_positions, std::span<const HeadRestore> heads);

 private:
  struct HeadState {
    int64_t length = 0;
    std::vector<int32_t> kept_pos;  // [n_kept] ascending positions of entries [0, n_kept)
    int64_t tail_pos0 = 0;          // position of entry n_kept (consecutive from there)
  };

  PagedKvCache(const KvShape& shape, int64_t capacity, BlockPool& pool,
               std::shared_ptr<const HeadGroupMap> map);

  HeadState& head(int layer, int kv_head) {
    return heads_[static_cast<size_t>(layer) * static_cast<size_t>(shape_.n_kv_head) +
                  static_cast<size_t>(kv_head)];
  }
  const HeadState& head(int layer, int kv_head) const {
    return heads_[static_cast<size_t>(layer) * static_cast<size_t>(shape_.n_kv_head) +
                  static_cast<size_t>(kv_head)];
  }
  bool valid_head(int layer, int kv_head) const {
    return layer >= 0 && layer < shape_.n_layers && kv_head >= 0 && kv_head < shape_.n_kv_head;
  }
  // Pages a group needs for every member to hold its entries plus the positions its layer has
  // yet to write up to n_total.
  int64_t group_pages_for(int flat_group, int64_t n_total) const;
  // Folds a head's trailing consecutive positions into kept_pos for entries [0, new_length), so
  // later appends continue from the layer's position count.
  void make_positions_explicit(int layer, HeadState& h, int64_t new_length);
  void change_used_slots(int64_t delta);
  int64_t release_group_tail(int flat_group, int64_t keep_pages);
  // Indices into a group's page table of the shared pages that appends up to n_total positions
  // write into (each once, ascending).
  std::vector<int64_t> shared_pages_written(int flat_group, int64_t n_total) const;
  // Replaces shared pages of a group's table by private copies, taking the copies from `fresh`
  // (one each, in order). The originals lose one reference.
  void copy_pages(int flat_group, std::span<const int64_t> indices, std::span<const PageId> fresh);
  // Copies, each from a newly allocated page, the shared pages of a group in [first, end)
  // (table indices). Error (nothing changed) when the pool has too few free pages.
  Status unshare_range(int flat_group, int64_t first, int64_t end);

  KvShape shape_;
  int64_t capacity_;
  BlockPool* pool_;
  std::shared_ptr<const HeadGroupMap> map_;
  std::vector<std::vector<PageId>> pages_;  // [total_groups] page table per flat group
  std::vector<HeadState> heads_;            // [n_layers][n_kv_head]
  std::vector<int64_t> layer_positions_;    // [n_layers] positions written per layer
  int64_t reserved_positions_ = 0;
  int64_t pages_held_ = 0;
  int64_t used_slots_ = 0;
};

}  // namespace tangram
