#include "kv/block_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace tangram {

namespace {

constexpr size_t kPageAlign = 64;  // cache line: pages start on a line

// A page's bytes must stay well inside size_t and its in-page offsets inside int64.
constexpr int64_t kMaxPageBytes = int64_t{1} << 30;

}  // namespace

size_t PageGeometry::column_bytes() const {
  return static_cast<size_t>(page_tokens / run_tokens()) * run_bytes();
}

size_t PageGeometry::page_bytes() const {
  return round_up_to(static_cast<size_t>(group_size) * column_bytes(), kPageAlign);
}

Status PageGeometry::validate() const {
  if (page_tokens < 1 || group_size < 1 || head_dim < 1 || head_dim_v < 1)
    return make_error(
        "KV pages: tokens per page ({}), heads per group ({}) and head sizes "
        "({}, {}) must all be positive",
        page_tokens, group_size, head_dim, head_dim_v);
  TG_TRY(check_kv_row_dims(type, head_dim, head_dim_v));
  if (head_dim > kMaxPageBytes / 4 || head_dim_v > kMaxPageBytes / 4)
    return make_error("KV pages: head sizes {} and {} are too large", head_dim, head_dim_v);
  const auto per_slot = static_cast<int64_t>(key_row_bytes() + value_row_bytes());
  if (int64_t{page_tokens} * group_size > kMaxPageBytes / per_slot)
    return make_error("KV pages: a page of {} tokens x {} heads x ({} + {}) dims is too large",
                      page_tokens, group_size, head_dim, head_dim_v);
  return Status::Ok();
}

Result<std::unique_ptr<BlockPool>> BlockPool::create(const PageGeometry& geometry,
                                                     size_t arena_bytes, bool prefault) {
  TG_TRY(geometry.validate());
  const size_t page_bytes = geometry.page_bytes();
  const size_t n_pages = arena_bytes / page_bytes;
  if (n_pages == 0)
    return make_error("KV memory of {} bytes holds no page of {} bytes", arena_bytes, page_bytes);
  if (n_pages > static_cast<size_t>(std::numeric_limits<PageId>::max()))
    return make_error("KV memory of {} bytes makes {} pages, more than page ids can count",
                      arena_bytes, n_pages);
  // Pages of one head are scattered over the arena; huge pages keep their TLB misses rare.
  TG_ASSIGN(HugePageBuffer arena, allocate_huge_page_buffer(n_pages * page_bytes, "KV memory"));
  if (prefault) std::memset(arena.get(), 0, round_up_to(n_pages * page_bytes, kHugePageBytes));
  try {
    return std::unique_ptr<BlockPool>(
        new BlockPool(geometry, page_bytes, static_cast<int64_t>(n_pages), std::move(arena)));
  } catch (const std::bad_alloc&) {
    return make_error("KV memory: out of memory for the page tables of {} pages", n_pages);
  }
}

BlockPool::BlockPool(const PageGeometry& geometry, size_t page_bytes, int64_t n_pages,
                     HugePageBuffer arena)
    : geometry_(geometry), page_bytes_(page_bytes), n_pages_(n_pages), arena_(std::move(arena)) {
  free_.resize(static_cast<size_t>(n_pages));
  // Stack order: page 0 is popped first.
  for (int64_t i = 0; i < n_pages; ++i)
    free_[static_cast<size_t>(i)] = static_cast<PageId>(n_pages - 1 - i);
  in_use_.assign(static_cast<size_t>(n_pages), 0);
  refs_.assign(static_cast<size_t>(n_pages), 0);
}

Status BlockPool::allocate(int64_t n, std::vector<PageId>& out) {
  if (n < 0) return make_error("KV pool: cannot allocate {} pages", n);
  if (n > free_pages())
    return make_error("KV pool full: {} pages needed, {} of {} free", n, free_pages(), n_pages_);
  try {
    out.reserve(out.size() + static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    return make_error("KV pool: out of host memory for a list of {} page ids", n);
  }
  for (int64_t i = 0; i < n; ++i) {
    const PageId id = free_.back();
    free_.pop_back();
    in_use_[static_cast<size_t>(id)] = 1;
    refs_[static_cast<size_t>(id)] = 1;
    out.push_back(id);
  }
  total_refs_ += n;
  return Status::Ok();
}

Status BlockPool::release(std::span<const PageId> pages) {
  // Pass 1 marks each page (2 = being released) so a duplicate in the list is caught; on an
  // error the marks are undone and nothing changes.
  size_t marked = 0;
  Status bad;
  for (; marked < pages.size(); ++marked) {
    const PageId id = pages[marked];
    if (id < 0 || id >= n_pages_) {
      bad = make_error("KV pool: release of page {} outside [0, {})", id, n_pages_);
      break;
    }
    uint8_t& flag = in_use_[static_cast<size_t>(id)];
    if (flag != 1) {
      bad = flag == 0 ? make_error("KV pool: page {} released but not in use", id)
                      : make_error("KV pool: page {} appears twice in one release", id);
      break;
    }
    flag = 2;
  }
  if (!bad.ok()) {
    for (size_t i = 0; i < marked; ++i) in_use_[static_cast<size_t>(pages[i])] = 1;
    return bad;
  }
  // free_ has capacity for every page, so these pushes never allocate.
  for (const PageId id : pages) {
    int32_t& refs = refs_[static_cast<size_t>(id)];
    if (--refs == 1) --shared_pages_;
    in_use_[static_cast<size_t>(id)] = refs > 0 ? 1 : 0;
    if (refs == 0) free_.push_back(id);
  }
  total_refs_ -= static_cast<int64_t>(pages.size());
  return Status::Ok();
}

Status BlockPool::share(std::span<const PageId> pages) {
  for (const PageId id : pages)
    if (!in_use(id)) return make_error("KV pool: page {} shared but not in use", id);
  for (const PageId id : pages)
    if (++refs_[static_cast<size_t>(id)] == 2) ++shared_pages_;
  total_refs_ += static_cast<int64_t>(pages.size());
  return Status::Ok();
}

PoolStats BlockPool::stats() const {
  PoolStats s;
  s.total_pages = n_pages_;
  s.free_pages = free_pages();
  s.used_pages = used_pages();
  s.page_bytes = page_bytes_;
  s.slots_per_page = geometry_.slots_per_page();
  s.allocated_slots = s.used_pages * s.slots_per_page;
  s.referenced_slots = total_refs_ * s.slots_per_page;
  s.shared_pages = shared_pages_;
  s.used_slots = used_slots_.load(std::memory_order_relaxed);
  s.wasted_slots = s.referenced_slots - s.used_slots;
  return s;
}

Status BlockPool::check_consistency() const {
  std::vector<uint8_t> seen(static_cast<size_t>(n_pages_), 0);
  for (const PageId id : free_) {
    if (id < 0 || id >= n_pages_) return make_error("KV pool: free list holds bad id {}", id);
    if (seen[static_cast<size_t>(id)]) return make_error("KV pool: page {} free twice", id);
    if (in_use_[static_cast<size_t>(id)] != 0)
      return make_error("KV pool: page {} both free and in use", id);
    seen[static_cast<size_t>(id)] = 1;
  }
  const auto n_in_use = std::count(in_use_.begin(), in_use_.end(), uint8_t{1});
  if (n_in_use + static_cast<int64_t>(free_.size()) != n_pages_)
    return make_error("KV pool: {} in use + {} free != {} pages", n_in_use, free_.size(), n_pages_);
  int64_t refs = 0;
  int64_t shared = 0;
  for (size_t i = 0; i < refs_.size(); ++i) {
    shared += refs_[i] > 1 ? 1 : 0;
    if ((refs_[i] > 0) != (in_use_[i] != 0))
      return make_error("KV pool: page {} has {} references but in-use flag {}", i, refs_[i],
                        in_use_[i]);
    refs += refs_[i];
  }
  if (refs != total_refs_ || shared != shared_pages_)
    return make_error("KV pool: {} references ({} shared pages) counted, {} ({}) recorded", refs,
                      shared, total_refs_, shared_pages_);
  const int64_t used = used_slots_.load(std::memory_order_relaxed);
  if (used < 0 || used > total_refs_ * geometry_.slots_per_page())
    return make_error("KV pool: {} used slots do not fit in {} page references", used, total_refs_);
  return Status::Ok();
}

}  // namespace tangram
