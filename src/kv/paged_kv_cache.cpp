#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "kv/kv_row.h"

namespace tangram {

namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The rows of one head, with its page table, column and the row sizes looked up once: loops
// over many rows (write, compact_head) address them through this instead of PageGeometry's
// key_offset/value_offset, which recompute the sizes from the row type at every call (on a
// model with 8-element heads that cost more than the copies).
struct HeadRows {
  uint8_t* k_base = nullptr;  // the head's first key row in page 0
  uint8_t* v_base = nullptr;
  const PageId* table = nullptr;
  int64_t page_tokens = 1;
  int64_t run_tokens = 1;
  size_t page_bytes = 0;
  size_t run_bytes = 0;
  size_t k_row_bytes = 0;
  size_t v_row_bytes = 0;
  KeyLayout key_layout = KeyLayout::Rows;
  int head_dim = 0;

  size_t offset(int64_t entry, size_t row_bytes) const {
    const int64_t slot = entry % page_tokens;
    return sz(table[sz(entry / page_tokens)]) * page_bytes + sz(slot / run_tokens) * run_bytes +
           sz(slot % run_tokens) * row_bytes;
  }
  uint8_t* key(int64_t entry) const { return k_base + offset(entry, k_row_bytes); }
  uint8_t* value(int64_t entry) const { return v_base + offset(entry, v_row_bytes); }
  // The key tile of the run holding entry (key tiles only) and the entry's token in it.
  uint8_t* tile(int64_t entry) const { return k_base + offset(entry, 0); }
  int64_t token(int64_t entry) const { return entry % page_tokens % run_tokens; }

  // Stores `count` plain key rows (kv_row.h) as the keys of entries [entry, entry + count),
  // which lie in one run.
  void put_keys(int64_t entry, const uint8_t* rows, int64_t count) const {
    if (key_layout == KeyLayout::Rows)
      std::memcpy(key(entry), rows, sz(count) * k_row_bytes);
    else
      store_tiled_keys(rows, count, tile(entry), run_tokens, token(entry), head_dim);
  }
  // Reads entry's key as a plain row (kv_row.h) into row.
  void get_key(int64_t entry, uint8_t* row) const {
    if (key_layout == KeyLayout::Rows)
      std::memcpy(row, key(entry), k_row_bytes);
    else
      load_tiled_keys(tile(entry), run_tokens, token(entry), 1, row, head_dim);
  }
  // Copies entry src's key and value to entry dst.
  void move_entry(int64_t dst, int64_t src) const {
    if (key_layout == KeyLayout::Rows)
      std::memcpy(key(dst), key(src), k_row_bytes);
    else
      move_tiled_key(tile(src), token(src), tile(dst), token(dst), run_tokens, head_dim);
    std::memcpy(value(dst), value(src), v_row_bytes);
  }
};

HeadRows head_rows(const BlockPool& pool, uint8_t* arena, const PageId* table, int column) {
  const PageGeometry& g = pool.geometry();
  HeadRows r;
  r.k_base = arena + g.key_offset(column, 0);
  r.v_base = arena + g.value_offset(column, 0);
  r.table = table;
  r.page_tokens = g.page_tokens;
  r.run_tokens = g.run_tokens();
  r.page_bytes = pool.page_bytes();
  r.run_bytes = g.run_bytes();
  r.k_row_bytes = g.key_row_bytes();
  r.v_row_bytes = g.value_row_bytes();
  r.key_layout = g.key_layout();
  r.head_dim = g.head_dim;
  return r;
}

}  // namespace

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::create(
    const KvShape& shape, int64_t capacity, BlockPool& pool,
    std::shared_ptr<const HeadGroupMap> map) {
  if (shape.n_layers < 1 || shape.n_head < 1 || shape.n_kv_head < 1 || shape.head_dim < 1 ||
      shape.head_dim_v < 1 || shape.n_head % shape.n_kv_head != 0)
    return make_error(
        "paged KV cache: bad shape ({} layers, {} heads, {} KV heads, head sizes {} "
        "and {})",
        shape.n_layers, shape.n_head, shape.n_kv_head, shape.head_dim, shape.head_dim_v);
  const PageGeometry& g = pool.geometry();
  if (g.head_dim != shape.head_dim || g.head_dim_v != shape.head_dim_v)
    return make_error(
        "paged KV cache: the pool's pages hold head sizes {} and {}, the model "
        "needs {} and {}",
        g.head_dim, g.head_dim_v, shape.head_dim, shape.head_dim_v);
  if (map == nullptr) return make_error("paged KV cache: no head-group map given");
  if (map->n_layers() != shape.n_layers || map->n_kv_head() != shape.n_kv_head)
    return make_error(
        "paged KV cache: the head-group map is for {} layers x {} KV heads, the "
        "model has {} x {}",
        map->n_layers(), map->n_kv_head(), shape.n_layers, shape.n_kv_head);
  if (map->group_size() > g.group_size)
    return make_error("paged KV cache: head groups of up to {} heads do not fit pages of {}",
                      map->group_size(), g.group_size);
  if (capacity < 1 || capacity > std::numeric_limits<int32_t>::max())
    return make_error("paged KV cache: capacity {} outside [1, {}]", capacity,
                      std::numeric_limits<int32_t>::max());
  try {
    return std::unique_ptr<PagedKvCache>(new PagedKvCache(shape, capacity, pool, std::move(map)));
  } catch (const std::bad_alloc&) {
    return make_error("paged KV cache: out of host memory for the page tables");
  }
}

PagedKvCache::PagedKvCache(const KvShape& shape, int64_t capacity, BlockPool& pool,
                           std::shared_ptr<const HeadGroupMap> map)
    : shape_(shape), capacity_(capacity), pool_(&pool), map_(std::move(map)) {
  pages_.resize(sz(map_->total_groups()));
  heads_.resize(sz(shape_.n_layers) * sz(shape_.n_kv_head));
  layer_positions_.assign(sz(shape_.n_layers), 0);
}

PagedKvCache::~PagedKvCache() {
  for (std::vector<PageId>& table : pages_) {
    // Our own pages: releasing them cannot fail.
    [[maybe_unused]] const Status s = pool_->release(table);
  }
  change_used_slots(-used_slots_);
}

int64_t PagedKvCache::length(int layer, int kv_head) const {
  return valid_head(layer, kv_head) ? head(layer, kv_head).length : 0;
}

std::span<const PageId> PagedKvCache::group_pages(int flat_group) const {
  if (flat_group < 0 || flat_group >= map_->total_groups()) return {};
  return pages_[sz(flat_group)];
}

int64_t PagedKvCache::group_pages_for(int flat_group, int64_t n_total) const {
  int64_t longest = 0;
  for (const int f : map_->members(flat_group)) {
    const int64_t to_write = n_total - layer_positions_[sz(map_->layer_of_head(f))];
    longest = std::max(longest, heads_[sz(f)].length + std::max<int64_t>(0, to_write));
  }
  return ceil_div(longest, pool_->geometry().page_tokens);
}

int64_t PagedKvCache::pages_needed(int64_t n_total) const {
  int64_t needed = 0;
  for (int fg = 0; fg < map_->total_groups(); ++fg) {
    needed += std::max<int64_t>(
        0, group_pages_for(fg, n_total) - static_cast<int64_t>(pages_[sz(fg)].size()));
    if (pool_->shared_pages() > 0)
      needed += static_cast<int64_t>(shared_pages_written(fg, n_total).size());
  }
  return needed;
}

int64_t PagedKvCache::pages_shared() const {
  int64_t shared = 0;
  for (const std::vector<PageId>& table : pages_)
    for (const PageId id : table) shared += pool_->shared(id) ? 1 : 0;
  return shared;
}

std::vector<int64_t> PagedKvCache::shared_pages_written(int flat_group, int64_t n_total) const {
  const std::vector<PageId>& table = pages_[sz(flat_group)];
  const int64_t P = pool_->geometry().page_tokens;
  std::vector<int64_t> out;
  for (const int f : map_->members(flat_group)) {
    const int64_t to_write = n_total - layer_positions_[sz(map_->layer_of_head(f))];
    if (to_write <= 0) continue;
    const int64_t length = heads_[sz(f)].length;
    const int64_t end =
        std::min(ceil_div(length + to_write, P), static_cast<int64_t>(table.size()));
    for (int64_t i = length / P; i < end; ++i)
      if (pool_->shared(table[sz(i)])) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void PagedKvCache::copy_pages(int flat_group, std::span<const int64_t> indices,
                              std::span<const PageId> fresh) {
  std::vector<PageId>& table = pages_[sz(flat_group)];
  for (size_t i = 0; i < indices.size(); ++i) {
    PageId& slot = table[sz(indices[i])];
    std::memcpy(pool_->page_data(fresh[i]), pool_->page_data(slot), pool_->page_bytes());
    const PageId original = slot;
    slot = fresh[i];
    // Another cache still references the original, so this only drops our reference.
    [[maybe_unused]] const Status s = pool_->release(std::span<const PageId>(&original, 1));
  }
}

Status PagedKvCache::unshare_range(int flat_group, int64_t first, int64_t end) {
  if (pool_->shared_pages() == 0) return Status::Ok();  // no fork anywhere: nothing to copy
  const std::vector<PageId>& table = pages_[sz(flat_group)];
  std::vector<int64_t> indices;
  for (int64_t i = std::max<int64_t>(first, 0);
       i < std::min(end, static_cast<int64_t>(table.size())); ++i)
    if (pool_->shared(table[sz(i)])) indices.push_back(i);
  if (indices.empty()) return Status::Ok();
  std::vector<PageId> fresh;
  TG_TRY(pool_->allocate(static_cast<int64_t>(indices.size()), fresh));
  copy_pages(flat_group, indices, fresh);
  return Status::Ok();
}

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::fork() const {
  std::unique_ptr<PagedKvCache> copy;
  try {
    copy.reset(new PagedKvCache(shape_, capacity_, *pool_, map_));
    copy->pages_ = pages_;
    copy->heads_ = heads_;
  } catch (const std::bad_alloc&) {
    return make_error("KV cache fork: out of host memory for the page tables");
  }
  for (const std::vector<PageId>& table : pages_) {
    // Our own pages, all in use: sharing them cannot fail.
    [[maybe_unused]] const Status s = pool_->share(table);
  }
  copy->layer_positions_ = layer_positions_;
  copy->reserved_positions_ = reserved_positions_;
  copy->pages_held_ = pages_held_;
  copy->change_used_slots(used_slots_);
  return copy;
}

Status PagedKvCache::reserve(int64_t n_total) {
  if (n_total > capacity_)
    return make_error("KV cache overflow: {} positions needed, capacity is {}", n_total, capacity_);
  const int64_t needed = pages_needed(n_total);
  if (needed > 0) {
    // Grow the tables first (the only step that may fail on host memory), then take pages:
    // new ones for the growth, and copies of the shared pages the appends will write into.
    std::vector<int64_t> deficit(pages_.size(), 0);
    std::vector<std::vector<int64_t>> copies(pages_.size());
    try {
      for (size_t fg = 0; fg < pages_.size(); ++fg) {
        std::vector<PageId>& table = pages_[fg];
        deficit[fg] = std::max<int64_t>(
            0, group_pages_for(static_cast<int>(fg), n_total) - static_cast<int64_t>(table.size()));
        table.reserve(table.size() + sz(deficit[fg]));
        copies[fg] = shared_pages_written(static_cast<int>(fg), n_total);
      }
    } catch (const std::bad_alloc&) {
      return make_error("KV cache: out of host memory for page tables");
    }
    std::vector<PageId> fresh;
    TG_TRY(pool_->allocate(needed, fresh));
    size_t next = 0;
    for (size_t fg = 0; fg < pages_.size(); ++fg) {
      copy_pages(static_cast<int>(fg), copies[fg],
                 std::span<const PageId>(fresh).subspan(next, copies[fg].size()));
      next += copies[fg].size();
      for (int64_t i = 0; i < deficit[fg]; ++i) pages_[fg].push_back(fresh[next++]);
      pages_held_ += deficit[fg];
    }
  }
  reserved_positions_ = std::max(reserved_positions_, n_total);
  return Status::Ok();
}

Status PagedKvCache::write(int layer, int64_t pos0, const float* k, const float* v, int64_t n) {
  if (layer < 0 || layer >= shape_.n_layers)
    return make_error("KV cache: layer {} out of range", layer);
  const int64_t at = layer_positions_[sz(layer)];
  if (n < 0 || pos0 != at || pos0 + n > capacity_ || (n > 0 && (k == nullptr || v == nullptr)))
    return make_error("KV cache: write of {} positions at {} (layer holds {}, capacity {})", n,
                      pos0, at, capacity_);
  // Only this layer's heads must fit: other members of a group may be ahead or behind.
  const int64_t P = pool_->geometry().page_tokens;
  for (int h = 0; h < shape_.n_kv_head; ++h)
    if (ceil_div(head(layer, h).length + n, P) >
        static_cast<int64_t>(pages_[sz(map_->group_of(layer, h))].size()))
      return make_error("KV cache: write of {} positions at {} in layer {} was not reserved", n,
                        pos0, layer);
  // Copy-on-write: a page shared with a fork is copied before this layer's rows go into it.
  for (int h = 0; h < shape_.n_kv_head; ++h)
    TG_TRY(unshare_range(map_->group_of(layer, h), head(layer, h).length / P,
                         ceil_div(head(layer, h).length + n, P)));
  const PageGeometry& geo = pool_->geometry();
  const int64_t hd = shape_.head_dim;
  const int64_t hdv = shape_.head_dim_v;
  // Key tiles take a plain row, quantised here first (key_tiles.h).
  const bool tiled = geo.key_layout() != KeyLayout::Rows;
  std::vector<uint8_t> quantised;
  if (tiled) quantised.resize(geo.key_row_bytes());
  for (int h = 0; h < shape_.n_kv_head; ++h) {
    HeadState& hs = head(layer, h);
    const HeadRows rows =
        head_rows(*pool_, pool_->page_data(0), pages_[sz(map_->group_of(layer, h))].data(),
                  map_->column_of(layer, h));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t src = t * shape_.n_kv_head + h;
      if (tiled) {
        store_kv_row(geo.type, k + src * hd, quantised.data(), hd);
        rows.put_keys(hs.length + t, quantised.data(), 1);
      } else {
        store_kv_row(geo.type, k + src * hd, rows.key(hs.length + t), hd);
      }
      store_kv_row(geo.type, v + src * hdv, rows.value(hs.length + t), hdv);
    }
    hs.length += n;  // the new entries continue the consecutive tail positions
  }
  layer_positions_[sz(layer)] += n;
  change_used_slots(n * shape_.n_kv_head);
  return Status::Ok();
}

KvHeadView PagedKvCache::head_view(int layer, int kv_head) const {
  KvHeadView v;
  if (!valid_head(layer, kv_head)) return v;
  const PageGeometry& g = pool_->geometry();
  const HeadState& hs = head(layer, kv_head);
  const int column = map_->column_of(layer, kv_head);
  const uint8_t* arena = pool_->page_data(0);
  v.k_base = arena + g.key_offset(column, 0);
  v.v_base = arena + g.value_offset(column, 0);
  v.pages = pages_[sz(map_->group_of(layer, kv_head))].data();
  v.page_tokens = g.page_tokens;
  v.page_bytes = pool_->page_bytes();
  v.run_tokens = g.run_tokens();
  v.run_bytes = g.run_bytes();
  v.k_row_bytes = g.key_row_bytes();
  v.v_row_bytes = g.value_row_bytes();
  v.key_layout = g.key_layout();
  v.head_dim = g.head_dim;
  v.length = hs.length;
  v.kept_pos = hs.kept_pos.data();
  v.n_kept = static_cast<int64_t>(hs.kept_pos.size());
  v.tail_pos0 = hs.tail_pos0;
  return v;
}

int64_t PagedKvCache::entry_position(int layer, int kv_head, int64_t entry) const {
  if (!valid_head(layer, kv_head)) return -1;
  const HeadState& hs = head(layer, kv_head);
  if (entry < 0 || entry >= hs.length) return -1;
  const auto n_kept = static_cast<int64_t>(hs.kept_pos.size());
  return entry < n_kept ? hs.kept_pos[sz(entry)] : hs.tail_pos0 + (entry - n_kept);
}

void PagedKvCache::make_positions_explicit(int layer, HeadState& h, int64_t new_length) {
  const auto n_kept = static_cast<int64_t>(h.kept_pos.size());
  if (new_length <= n_kept) {
    h.kept_pos.resize(sz(new_length));
  } else {
    for (int64_t e = n_kept; e < new_length; ++e)
      h.kept_pos.push_back(static_cast<int32_t>(h.tail_pos0 + (e - n_kept)));
  }
  h.tail_pos0 = layer_positions_[sz(layer)];
}

Status PagedKvCache::set_head_length(int layer, int kv_head, int64_t new_length) {
  if (!valid_head(layer, kv_head))
    return make_error("KV cache: no KV head {} in layer {}", kv_head, layer);
  HeadState& hs = head(layer, kv_head);
  if (new_length < 0 || new_length > hs.length)
    return make_error("KV cache: head length {} outside [0, {}]", new_length, hs.length);
  if (new_length == hs.length) return Status::Ok();
  try {
    make_positions_explicit(layer, hs, new_length);
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: out of host memory for the kept positions");
  }
  change_used_slots(new_length - hs.length);
  hs.length = new_length;
  return Status::Ok();
}

Status PagedKvCache::compact_head(int layer, int kv_head, std::span<const int64_t> keep) {
  if (!valid_head(layer, kv_head))
    return make_error("KV cache: no KV head {} in layer {}", kv_head, layer);
  HeadState& hs = head(layer, kv_head);
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] < 0 || keep[i] >= hs.length || (i > 0 && keep[i] <= keep[i - 1]))
      return make_error("KV cache: kept entry {} at index {} is not ascending within [0, {})",
                        keep[i], i, hs.length);
  std::vector<int32_t> positions;
  try {
    positions.resize(keep.size());
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: out of host memory for the kept positions");
  }
  const auto n_kept = static_cast<int64_t>(hs.kept_pos.size());  // keep[] was checked above
  for (size_t i = 0; i < keep.size(); ++i)
    positions[i] = keep[i] < n_kept ? hs.kept_pos[sz(keep[i])]
                                    : static_cast<int32_t>(hs.tail_pos0 + (keep[i] - n_kept));
  // Copy-on-write: the pages rows move into are copied first when a fork still reads them.
  const PageGeometry& g = pool_->geometry();
  size_t first_moved = 0;
  while (first_moved < keep.size() && keep[first_moved] == static_cast<int64_t>(first_moved))
    ++first_moved;
  if (first_moved < keep.size())
    TG_TRY(unshare_range(map_->group_of(layer, kv_head),
                         static_cast<int64_t>(first_moved) / g.page_tokens,
                         ceil_div(static_cast<int64_t>(keep.size()), g.page_tokens)));
  // keep[i] >= i and ascending, so row keep[i] is read before anything overwrites it. The head's
  // rows are addressed after the copy-on-write above, which may have replaced pages in its table.
  const HeadRows rows =
      head_rows(*pool_, pool_->page_data(0), pages_[sz(map_->group_of(layer, kv_head))].data(),
                map_->column_of(layer, kv_head));
  for (size_t i = 0; i < keep.size(); ++i) {
    const auto dst = static_cast<int64_t>(i);
    const int64_t src = keep[i];
    if (src == dst) continue;
    rows.move_entry(dst, src);
  }
  hs.kept_pos.swap(positions);
  hs.tail_pos0 = layer_positions_[sz(layer)];
  const auto kept = static_cast<int64_t>(keep.size());
  change_used_slots(kept - hs.length);
  hs.length = kept;
  return Status::Ok();
}

int64_t PagedKvCache::release_group_tail(int flat_group, int64_t keep_pages) {
  std::vector<PageId>& table = pages_[sz(flat_group)];
  const auto held = static_cast<int64_t>(table.size());
  if (held <= keep_pages) return 0;
  const std::span<const PageId> tail(table.data() + keep_pages, sz(held - keep_pages));
  if (!pool_->release(tail).ok()) return 0;  // cannot happen: the pages are ours
  table.resize(sz(keep_pages));
  pages_held_ -= held - keep_pages;
  return held - keep_pages;
}

int64_t PagedKvCache::release_unused_pages(int layer) {
  if (layer < 0 || layer >= shape_.n_layers) return 0;
  int64_t released = 0;
  for (const HeadGroupMap::LayerGroup& lg : map_->layer_groups(layer))
    released +=
        release_group_tail(lg.flat_group, group_pages_for(lg.flat_group, reserved_positions_));
  return released;
}

int64_t PagedKvCache::release_unused_pages() {
  int64_t released = 0;
  for (int fg = 0; fg < map_->total_groups(); ++fg)
    released += release_group_tail(fg, group_pages_for(fg, reserved_positions_));
  return released;
}

Status PagedKvCache::remove_positions(int64_t from, int64_t to, const KeyRotation& rotate) {
  const int64_t n = n_positions();
  if (from < 0 || from >= to || to > n)
    return make_error("KV cache: cannot remove positions [{}, {}) of {}", from, to, n);
  if (std::any_of(layer_positions_.begin(), layer_positions_.end(),
                  [n](int64_t p) { return p != n; }))
    return make_error("KV cache: positions can be removed only between steps");
  const int64_t delta = to - from;
  const PageGeometry& g = pool_->geometry();
  std::vector<int64_t> keep;
  std::vector<uint8_t> row(g.key_row_bytes());
  std::vector<float> keys;
  for (int l = 0; l < shape_.n_layers; ++l)
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      HeadState& hs = head(l, h);
      // Entries outside [from, to) stay; compact_head moves them down and lists their positions.
      keep.clear();
      int64_t first_moved = -1;  // the first kept entry at a position >= to
      for (int64_t e = 0; e < hs.length; ++e) {
        const int64_t pos = entry_position(l, h, e);
        if (pos >= from && pos < to) continue;
        if (pos >= to && first_moved < 0) first_moved = static_cast<int64_t>(keep.size());
        keep.push_back(e);
      }
      TG_TRY(compact_head(l, h, keep));
      if (first_moved < 0) continue;
      for (int32_t& pos : hs.kept_pos)
        if (pos >= to) pos -= static_cast<int32_t>(delta);
      // Keys are stored after RoPE: moving an entry back by delta positions is a rotation of its
      // key by -delta, done in float and stored again (Q8_0 keys are quantised once more).
      const int flat = map_->group_of(l, h);
      const auto n_moved = static_cast<int64_t>(keep.size()) - first_moved;
      TG_TRY(unshare_range(flat, first_moved / g.page_tokens,
                           ceil_div(static_cast<int64_t>(keep.size()), g.page_tokens)));
      const HeadRows rows =
          head_rows(*pool_, pool_->page_data(0), pages_[sz(flat)].data(), map_->column_of(l, h));
      try {
        keys.resize(sz(n_moved) * sz(g.head_dim));
      } catch (const std::bad_alloc&) {
        return make_error("KV cache: out of host memory to move {} keys", n_moved);
      }
      for (int64_t i = 0; i < n_moved; ++i) {
        rows.get_key(first_moved + i, row.data());
        load_kv_row(g.type, row.data(), keys.data() + sz(i) * sz(g.head_dim), g.head_dim);
      }
      rotate(keys.data(), n_moved, delta);
      for (int64_t i = 0; i < n_moved; ++i) {
        store_kv_row(g.type, keys.data() + sz(i) * sz(g.head_dim), row.data(), g.head_dim);
        rows.put_keys(first_moved + i, row.data(), 1);
      }
    }
  for (int64_t& p : layer_positions_) p -= delta;
  for (HeadState& hs : heads_) hs.tail_pos0 = n - delta;
  reserved_positions_ = std::max<int64_t>(reserved_positions_ - delta, n - delta);
  release_unused_pages();
  return Status::Ok();
}

void PagedKvCache::truncate(int64_t n_tokens) {
  const int64_t n = std::max<int64_t>(n_tokens, 0);
  for (int l = 0; l < shape_.n_layers; ++l) {
    if (layer_positions_[sz(l)] <= n) continue;
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      HeadState& hs = head(l, h);
      const auto n_kept = static_cast<int64_t>(hs.kept_pos.size());
      int64_t new_length;
      if (n >= hs.tail_pos0) {
        new_length = n_kept + (n - hs.tail_pos0);
      } else {
        // Only kept entries before n survive; the tail restarts at n.
        new_length =
            std::lower_bound(hs.kept_pos.begin(), hs.kept_pos.end(), n) - hs.kept_pos.begin();
        hs.kept_pos.resize(sz(new_length));
        hs.tail_pos0 = n;
      }
      change_used_slots(new_length - hs.length);
      hs.length = new_length;
    }
    layer_positions_[sz(l)] = n;
  }
  reserved_positions_ = std::min(reserved_positions_, n);
  release_unused_pages();
}

Status PagedKvCache::restore(int64_t n_positions, std::span<const HeadRestore> heads) {
  if (pages_held_ != 0 || used_slots_ != 0 ||
      std::any_of(layer_positions_.begin(), layer_positions_.end(),
                  [](int64_t n) { return n != 0; }))
    return make_error("KV cache restore: the cache is not empty");
  if (n_positions < 0 || n_positions > capacity_)
    return make_error("KV cache restore: {} positions outside [0, {}]", n_positions, capacity_);
  if (heads.size() != heads_.size())
    return make_error("KV cache restore: {} heads given, the cache has {}", heads.size(),
                      heads_.size());
  for (int l = 0; l < shape_.n_layers; ++l)
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const HeadRestore& r = heads[sz(l) * sz(shape_.n_kv_head) + sz(h)];
      const auto n_kept = static_cast<int64_t>(r.kept_pos.size());
      bool ascending = true;
      for (size_t i = 0; i < r.kept_pos.size(); ++i)
        ascending =
            ascending && r.kept_pos[i] >= 0 && (i == 0 || r.kept_pos[i] > r.kept_pos[i - 1]);
      if (r.length < n_kept || r.tail_pos0 < 0 || r.tail_pos0 > n_positions ||
          r.length - n_kept > n_positions - r.tail_pos0)
        return make_error(
            "KV cache restore: layer {} head {} holds {} entries ({} kept, tail from "
            "position {}) in {} positions",
            l, h, r.length, n_kept, r.tail_pos0, n_positions);
      if (!ascending || (n_kept > 0 && r.kept_pos.back() >= r.tail_pos0))
        return make_error(
            "KV cache restore: layer {} head {} positions are not strictly ascending "
            "below {}",
            l, h, r.tail_pos0);
      if (r.length > 0 && (r.keys == nullptr || r.values == nullptr))
        return make_error("KV cache restore: layer {} head {} has no rows", l, h);
    }
  // Pages per flat group: its longest head.
  const int64_t P = pool_->geometry().page_tokens;
  std::vector<int64_t> group_pages(pages_.size(), 0);
  int64_t needed = 0;
  for (size_t fg = 0; fg < pages_.size(); ++fg) {
    int64_t longest = 0;
    for (const int f : map_->members(static_cast<int>(fg)))
      longest = std::max(longest, heads[sz(f)].length);
    group_pages[fg] = ceil_div(longest, P);
    needed += group_pages[fg];
  }
  // Host memory first (the only other step that may fail), then the pages.
  std::vector<std::vector<int32_t>> kept(heads_.size());
  try {
    for (size_t i = 0; i < heads.size(); ++i)
      kept[i].assign(heads[i].kept_pos.begin(), heads[i].kept_pos.end());
    for (size_t fg = 0; fg < pages_.size(); ++fg) pages_[fg].reserve(sz(group_pages[fg]));
  } catch (const std::bad_alloc&) {
    return make_error("KV cache restore: out of host memory for page tables");
  }
  if (needed > pool_->free_pages())
    return make_error("KV cache restore: the session needs {} pages, the pool has {} free", needed,
                      pool_->free_pages());
  std::vector<PageId> fresh;
  TG_TRY(pool_->allocate(needed, fresh));
  size_t next = 0;
  for (size_t fg = 0; fg < pages_.size(); ++fg)
    for (int64_t i = 0; i < group_pages[fg]; ++i) pages_[fg].push_back(fresh[next++]);
  pages_held_ = needed;
  // Rows: one copy per page run a head touches (a run's slots are contiguous, block_pool.h).
  const size_t kb = pool_->geometry().key_row_bytes();
  const size_t vb = pool_->geometry().value_row_bytes();
  const int64_t R = pool_->geometry().run_tokens();
  int64_t stored = 0;
  for (int l = 0; l < shape_.n_layers; ++l)
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const size_t i = sz(l) * sz(shape_.n_kv_head) + sz(h);
      const HeadRestore& r = heads[i];
      const HeadRows rows =
          head_rows(*pool_, pool_->page_data(0), pages_[sz(map_->group_of(l, h))].data(),
                    map_->column_of(l, h));
      for (int64_t e = 0; e < r.length;) {
        const int64_t count = std::min(r.length - e, R - e % R);
        rows.put_keys(e, r.keys + sz(e) * kb, count);
        std::memcpy(rows.value(e), r.values + sz(e) * vb, sz(count) * vb);
        e += count;
      }
      HeadState& hs = heads_[i];
      hs.length = r.length;
      hs.kept_pos.swap(kept[i]);
      hs.tail_pos0 = r.tail_pos0;
      stored += r.length;
    }
  std::fill(layer_positions_.begin(), layer_positions_.end(), n_positions);
  reserved_positions_ = n_positions;
  change_used_slots(stored);
  return Status::Ok();
}

void PagedKvCache::change_used_slots(int64_t delta) {
  used_slots_ += delta;
  pool_->add_used_slots(delta);
}

}  // namespace tangram
