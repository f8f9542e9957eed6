// The KV page arena shared by every sequence: one allocation made up front (the --kv-memory
// budget), cut into fixed-size pages handed out and taken back through a free list.
//
// A page holds `page_tokens` (P) token slots for the `group_size` (G) KV heads of one head
// group of one layer, keys and values, in the KV element type (F32, F16 or Q8_0 blocks).
// Layout: one block per head (page column), each cut into runs of R = run_tokens() slots whose
// key rows and then value rows are contiguous:
//   [G] x [P / R] x { keys: [R][key row], values: [R][value row] }   (row bytes from the type)
// padded to a multiple of 64 bytes. R is kPageRunTokens (the attention kernel's block) when P
// is a multiple of it, else P (one run: keys [P] then values [P]). Q8_0 pages whose R is a
// multiple of 16 keep a run's keys as one key tile instead of rows (key_tiles.h: the same bytes,
// interleaved for the score loop); key_layout() says which. So a block of attention
// reads one run, keys then values in address order, whatever the page size, and a larger page
// only lengthens a column: a head group mixing layers leaves longer stretches between the
// other layer's columns. Every group of every layer uses the same page size, so pages are
// interchangeable; a group of fewer than G heads leaves columns unused (counted as wasted
// slots). Only this file and KvHeadView know the layout: everything else addresses rows
// through key_offset/value_offset or a head view's for_each_run.
//
// A page may be shared by several caches (a fork: the n choices of one prompt read the prompt's
// pages). Each page carries a reference count: allocate() hands a page out with one reference,
// share() adds one, release() drops one and frees the page with its last. A cache never writes
// into a page another cache still references; it copies it first (see PagedKvCache).
//
// Threading: allocate/release/share are meant for one thread at a time (the scheduler);
// only the used-slot counter, which writers update, is atomic. Page memory itself is read by
// the attention kernels of many threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/huge_pages.h"
#include "common/result.h"
#include "kv/key_tiles.h"
#include "kv/kv_cache.h"
#include "kv/kv_row.h"

namespace tangram {

using PageId = int32_t;
inline constexpr PageId kNoPage = -1;

// Slots of one run of a page column when the page holds a multiple of them (see above); equal
// to kAttentionBlock (attention_kernel.h checks it), so one run is one block of attention.
inline constexpr int kPageRunTokens = 32;

struct PageGeometry {
  int page_tokens = 16;  // P: token slots per head in one page
  int group_size = 4;    // G: KV heads sharing one page
  int head_dim = 0;      // key row length
  int head_dim_v = 0;    // value row length
  KvType type = KvType::F16;

  // Bytes of one head's key (value) row, as the type stores it (kv_row.h).
  size_t key_row_bytes() const { return kv_row_bytes(type, head_dim); }
  size_t value_row_bytes() const { return kv_row_bytes(type, head_dim_v); }
  // Slots per run of a column: kPageRunTokens when P is a multiple of it, else P.
  int run_tokens() const {
    return page_tokens % kPageRunTokens == 0 ? kPageRunTokens : page_tokens;
  }
  // Bytes of one run: its key rows, then its value rows.
  size_t run_bytes() const {
    return static_cast<size_t>(run_tokens()) * (key_row_bytes() + value_row_bytes());
  }
  // Bytes of one head's block in a page: P / R runs.
  size_t column_bytes() const;
  // How a run stores its keys: rows, or a Q8_0 key tile (key_tiles.h).
  KeyLayout key_layout() const { return page_key_layout(type, run_tokens()); }
  // Byte offsets, inside a page, of the key and value row of (column, slot). With key tiles a
  // slot has no key row of its own: key_offset(column, slot) is then its run's tile only for the
  // run's first slot (slot % R == 0).
  size_t key_offset(int column, int64_t slot) const {
    const int64_t r = run_tokens();
    return static_cast<size_t>(column) * column_bytes() +
           static_cast<size_t>(slot / r) * run_bytes() +
           static_cast<size_t>(slot % r) * key_row_bytes();
  }
  size_t value_offset(int column, int64_t slot) const {
    const int64_t r = run_tokens();
    return static_cast<size_t>(column) * column_bytes() +
           static_cast<size_t>(slot / r) * run_bytes() + static_cast<size_t>(r) * key_row_bytes() +
           static_cast<size_t>(slot % r) * value_row_bytes();
  }
  size_t page_bytes() const;
  // Head-token slots per page: P * G.
  int64_t slots_per_page() const { return int64_t{page_tokens} * group_size; }
  // Checks every field is positive, the head sizes suit the type (Q8_0: multiples of 32) and
  // the page is small enough for the offsets to fit.
  Status validate() const;
};

struct PoolStats {
  int64_t total_pages = 0;
  int64_t used_pages = 0;
  int64_t free_pages = 0;
  size_t page_bytes = 0;
  // One slot = one token of one KV head (its key and value row).
  int64_t slots_per_page = 0;   // P * G
  int64_t allocated_slots = 0;  // used_pages * P * G
  // Slots counted once per cache referencing their page (= allocated_slots without sharing).
  int64_t referenced_slots = 0;
  int64_t shared_pages = 0;  // pages referenced by more than one cache
  int64_t used_slots = 0;    // entries actually stored by the caches (per referencing cache)
  int64_t wasted_slots = 0;  // referenced but holding nothing (partial pages, short heads)
  double waste_fraction() const {
    return referenced_slots > 0
               ? static_cast<double>(wasted_slots) / static_cast<double>(referenced_slots)
               : 0.0;
  }
};

class BlockPool {
 public:
  // Cuts arena_bytes into pages of geometry.page_bytes(). The arena is 2 MiB aligned and
  // advised for huge pages; with prefault it is also written once now, so that no page fault
  // (and no OS work) happens later on the serving path. Errors: invalid geometry, an arena
  // smaller than one page, more than 2^31-1 pages, or the allocation failing.
  static Result<std::unique_ptr<BlockPool>> create(const PageGeometry& geometry, size_t arena_bytes,
                                                   bool prefault = true);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() = default;

  const PageGeometry& geometry() const { return geometry_; }
  size_t page_bytes() const { return page_bytes_; }
  int64_t total_pages() const { return n_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_pages() const { return n_pages_ - free_pages(); }

  // Appends n fresh page ids to out, or, when fewer than n are free, appends nothing and
  // returns a "pool full" error. O(n), no system calls.
  Status allocate(int64_t n, std::vector<PageId>& out);
  // Drops one reference of each page; a page whose last reference goes returns to the free
  // list. Every id must be in use and appear once; otherwise an error and nothing changes.
  Status release(std::span<const PageId> pages);
  // Adds one reference to each page (a fork now reads them too). Every id must be in use;
  // otherwise an error and nothing changes.
  Status share(std::span<const PageId> pages);

  bool in_use(PageId id) const {
    return id >= 0 && id < n_pages_ && in_use_[static_cast<size_t>(id)] != 0;
  }
  // References held on a page (0 when free or out of range).
  int32_t ref_count(PageId id) const {
    return id >= 0 && id < n_pages_ ? refs_[static_cast<size_t>(id)] : 0;
  }
  // True when another cache references the page too: it must be copied before a write.
  bool shared(PageId id) const { return ref_count(id) > 1; }
  // Pages referenced by more than one cache now.
  int64_t shared_pages() const { return shared_pages_; }

  // Start of a page's memory; id must be a valid page id.
  uint8_t* page_data(PageId id) { return arena_.get() + static_cast<size_t>(id) * page_bytes_; }
  const uint8_t* page_data(PageId id) const {
    return arena_.get() + static_cast<size_t>(id) * page_bytes_;
  }

  // Caches report the entries they store (+ on write, - on removal) so waste is visible here.
  void add_used_slots(int64_t delta) { used_slots_.fetch_add(delta, std::memory_order_relaxed); }

  PoolStats stats() const;

  // Full consistency check of the free list against the in-use flags (O(pages)); for tests.
  Status check_consistency() const;

 private:
  BlockPool(const PageGeometry& geometry, size_t page_bytes, int64_t n_pages, HugePageBuffer arena);

  PageGeometry geometry_;
  size_t page_bytes_;
  int64_t n_pages_;
  HugePageBuffer arena_;         // [n_pages_][page_bytes_], 2 MiB aligned
  std::vector<PageId> free_;     // stack of free ids (LIFO: recently freed pages are warm)
  std::vector<uint8_t> in_use_;  // [n_pages_]: 1 while handed out (2 marks a page in a release)
  std::vector<int32_t> refs_;    // [n_pages_]: references held, 0 when free
  int64_t total_refs_ = 0;       // sum of refs_
  int64_t shared_pages_ = 0;     // pages with refs_ > 1
  std::atomic<int64_t> used_slots_{0};
};

}  // namespace tangram
