#include "attention/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>

#include "attention/attention_kernel.h"
#include "kv/head_group_map.h"

namespace tangram {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t sz(int64_t n) { return static_cast<size_t>(n); }

// Query vectors of an item or merge: KV heads x rows x query heads per KV head.
int64_t lanes_of(const AttentionBatch& batch, int32_t head_begin, int32_t head_end,
                 int32_t row_begin, int32_t row_end) {
  return int64_t{head_end - head_begin} * (row_end - row_begin) * batch.q_per_kv();
}

// Where a lane of an item (or merge) reads its query and writes its output.
struct LaneAddress {
  int32_t kv_head;
  int64_t row;
  int64_t q_head;
};
LaneAddress lane_address(const AttentionBatch& batch, int32_t seq, int32_t head_begin,
                         int32_t row_begin, int32_t row_end, int64_t lane) {
  const int gq = batch.q_per_kv();
  const int64_t rows = row_end - row_begin;
  const int64_t head_slot = lane / (rows * gq);
  const int32_t kv_head =
      batch.head_order[batch.at(seq, head_begin + static_cast<int32_t>(head_slot))];
  const int64_t row = row_begin + (lane / gq) % rows;
  return {kv_head, row, int64_t{kv_head} * gq + lane % gq};
}

// Combines the parts of split lanes exactly: with M = max_k m_k over parts that saw entries,
// out = sum_k acc_k e^(m_k - M) / sum_k l_k e^(m_k - M). Parts are read in order, so the result
// does not depend on which thread finished first.
void merge_parts(const AttentionBatch& batch, const AttentionMerge& mg,
                 const AttentionWorkspace& ws) {
  const AttentionSequence& seq = batch.seqs[sz(mg.seq)];
  const int hdv = batch.head_dim_v;
  const int64_t lanes = lanes_of(batch, mg.head_begin, mg.head_end, mg.row_begin, mg.row_end);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const LaneAddress a =
        lane_address(batch, mg.seq, mg.head_begin, mg.row_begin, mg.row_end, lane);
    float* out = seq.out + (a.row * batch.n_head + a.q_head) * hdv;
    float max = kNegInf;
    for (int32_t k = 0; k < mg.n_parts; ++k) {
      const size_t slot = sz(mg.first_partial + k * lanes + lane);
      if (ws.part_l[slot] > 0.0f) max = std::max(max, ws.part_m[slot]);
    }
    std::fill_n(out, hdv, 0.0f);
    if (max == kNegInf) continue;  // no part saw an entry
    float sum = 0.0f;
    for (int32_t k = 0; k < mg.n_parts; ++k) {
      const size_t slot = sz(mg.first_partial + k * lanes + lane);
      if (ws.part_l[slot] > 0.0f) sum += ws.part_l[slot] * std::exp(ws.part_m[slot] - max);
    }
    for (int32_t k = 0; k < mg.n_parts; ++k) {
      const size_t slot = sz(mg.first_partial + k * lanes + lane);
      if (ws.part_l[slot] <= 0.0f) continue;
      const float w = std::exp(ws.part_m[slot] - max) / sum;
      const float* acc = ws.part_acc.data() + slot * sz(hdv);
      for (int i = 0; i < hdv; ++i) out[i] += w * acc[i];
    }
  }
}

void run_work(const AttentionBatch& batch, const AttentionPlan& plan, const AttentionWork& w,
              AttentionWorkspace::Thread& th, AttentionWorkspace& ws) {
  const AttentionSequence& seq = batch.seqs[sz(w.seq)];
  const int gq = batch.q_per_kv();
  const int hd = batch.head_dim;
  const int hdv = batch.head_dim_v;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t rows = w.row_end - w.row_begin;
  const int64_t per_head = rows * gq;  // lanes of one KV head
  const int32_t n_heads = w.head_end - w.head_begin;
  const int64_t lanes = per_head * n_heads;
  const int64_t begin = std::max<int64_t>(0, w.entry_begin);
  for (int32_t i = 0; i < n_heads; ++i) {
    const int32_t kv_head = batch.head_order[batch.at(w.seq, w.head_begin + i)];
    const KvHeadView& view = batch.head(w.seq, kv_head);
    const int64_t end = std::clamp<int64_t>(w.entry_end, 0, view.length);
    const int64_t first = std::min(begin, end);
    const int64_t lane0 = i * per_head;
    int64_t hi = first;
    for (int64_t lane = lane0; lane < lane0 + per_head; ++lane) {
      const int64_t row = w.row_begin + (lane - lane0) / gq;
      const int64_t q_head = int64_t{kv_head} * gq + lane % gq;
      const float* q = seq.q + (row * batch.n_head + q_head) * hd;
      float* qs = th.q.data() + lane * hd;
      for (int d = 0; d < hd; ++d) qs[d] = q[d] * scale;
      th.limit[sz(lane)] = std::clamp(view.visible(seq.pos0 + row), first, end);
      hi = std::max(hi, th.limit[sz(lane)]);
      th.m[sz(lane)] = kNegInf;
      th.l[sz(lane)] = 0.0f;
    }
    th.heads[sz(i)] = HeadLanes{&view,
                                static_cast<int>(per_head),
                                th.q.data() + lane0 * hd,
                                th.limit.data() + lane0,
                                hi,
                                th.m.data() + lane0,
                                th.l.data() + lane0,
                                th.acc.data() + lane0 * hdv,
                                th.scores.data() + lane0 * kAttentionBlock};
  }
  std::fill_n(th.acc.data(), lanes * hdv, 0.0f);
  attend_heads(std::span<const HeadLanes>(th.heads.data(), sz(n_heads)), batch.type, hd, hdv,
               begin);

  if (w.merge < 0) {
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const LaneAddress a = lane_address(batch, w.seq, w.head_begin, w.row_begin, w.row_end, lane);
      float* out = seq.out + (a.row * batch.n_head + a.q_head) * hdv;
      const float l = th.l[sz(lane)];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const float* acc = th.acc.data() + lane * hdv;
      for (int d = 0; d < hdv; ++d) out[d] = acc[d] * inv;
    }
    return;
  }
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const size_t slot = sz(w.partial + lane);
    ws.part_m[slot] = th.m[sz(lane)];
    ws.part_l[slot] = th.l[sz(lane)];
    std::copy_n(th.acc.data() + lane * hdv, hdv, ws.part_acc.data() + slot * sz(hdv));
  }
  // The last part to finish merges; acq_rel makes every part's partials visible to it.
  if (ws.merge_left[sz(w.merge)].fetch_sub(1, std::memory_order_acq_rel) == 1)
    merge_parts(batch, plan.merges[sz(w.merge)], ws);
}

// Grows the workspace for a plan; false when host memory runs out.
bool size_workspace(const AttentionBatch& batch, const AttentionPlan& plan, int n_threads,
                    AttentionWorkspace& ws) {
  int64_t max_lanes = 0;
  for (const AttentionWork& w : plan.work)
    max_lanes =
        std::max(max_lanes, lanes_of(batch, w.head_begin, w.head_end, w.row_begin, w.row_end));
  try {
    if (ws.threads.size() < sz(n_threads)) ws.threads.resize(sz(n_threads));
    for (AttentionWorkspace::Thread& th : ws.threads) {
      auto grow = [](auto& v, int64_t n) {
        if (v.size() < sz(n)) v.resize(sz(n));
      };
      grow(th.q, max_lanes * batch.head_dim);
      grow(th.acc, max_lanes * batch.head_dim_v);
      grow(th.m, max_lanes);
      grow(th.l, max_lanes);
      grow(th.limit, max_lanes);
      grow(th.scores, max_lanes * kAttentionBlock);
      grow(th.heads, batch.n_kv_head);
    }
    const size_t slots = sz(plan.n_partial_slots);
    if (ws.part_m.size() < slots) {
      ws.part_m.resize(slots);
      ws.part_l.resize(slots);
    }
    if (ws.part_acc.size() < slots * sz(batch.head_dim_v))
      ws.part_acc.resize(slots * sz(batch.head_dim_v));
    ws.ranges.reserve(sz(n_threads));
    if (ws.merge_capacity < plan.merges.size()) {
      ws.merge_left = std::make_unique<std::atomic<int32_t>[]>(plan.merges.size());
      ws.merge_capacity = plan.merges.size();
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

}  // namespace

AttentionWorkspace::AttentionWorkspace() = default;
AttentionWorkspace::~AttentionWorkspace() = default;

Status build_attention_batch(int layer, std::span<const AttentionItem> items,
                             AttentionBatch& batch) {
  if (items.empty()) return make_error("attention: no sequences given");
  if (items.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return make_error("attention: {} sequences are too many for one call", items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const AttentionItem& it = items[i];
    if (it.cache == nullptr) return make_error("attention: sequence {} has no cache", i);
    const KvShape& s = it.cache->shape();
    const KvShape& s0 = items[0].cache->shape();
    if (s.n_head != s0.n_head || s.n_kv_head != s0.n_kv_head || s.head_dim != s0.head_dim ||
        s.head_dim_v != s0.head_dim_v || s.n_layers != s0.n_layers ||
        it.cache->type() != items[0].cache->type())
      return make_error("attention: sequence {} has a cache of another shape or type", i);
    if (layer < 0 || layer >= s.n_layers)
      return make_error("attention: layer {} outside [0, {})", layer, s.n_layers);
    if (it.n < 0 || it.n > std::numeric_limits<int32_t>::max() || it.pos0 < 0)
      return make_error("attention: sequence {} has {} query rows at position {}", i, it.n,
                        it.pos0);
    if (it.n > 0 && (it.q == nullptr || it.out == nullptr))
      return make_error("attention: sequence {} has no query or output buffer", i);
  }
  const KvShape& s0 = items[0].cache->shape();
  batch.n_head = s0.n_head;
  batch.n_kv_head = s0.n_kv_head;
  batch.head_dim = s0.head_dim;
  batch.head_dim_v = s0.head_dim_v;
  batch.type = items[0].cache->type();
  try {
    batch.seqs.clear();
    batch.heads.clear();
    batch.head_order.clear();
    batch.group_start.clear();
    for (const AttentionItem& it : items) {
      batch.seqs.push_back({it.q, it.out, it.n, it.pos0});
      for (int h = 0; h < s0.n_kv_head; ++h) batch.heads.push_back(it.cache->head_view(layer, h));
      const HeadGroupMap& map = it.cache->head_groups();
      // The layer's heads group by group (a cross-layer group contributes its members in this
      // layer), so tiles of whole groups read the pages those heads share.
      const std::span<const int> heads = map.layer_heads(layer);
      for (const HeadGroupMap::LayerGroup& lg : map.layer_groups(layer))
        for (int i = lg.begin; i < lg.end; ++i) {
          batch.head_order.push_back(heads[static_cast<size_t>(i)]);
          batch.group_start.push_back(i == lg.begin ? 1 : 0);
        }
    }
  } catch (const std::bad_alloc&) {
    return make_error("attention: out of host memory for a batch of {} sequences", items.size());
  }
  return Status::Ok();
}

void plan_attention(const AttentionBatch& batch, int n_threads, AttentionPlan& plan,
                    const AttentionPlanOptions& options) {
  plan.work.clear();
  plan.merges.clear();
  plan.n_partial_slots = 0;
  plan.thread_begin.clear();
  const int gq = batch.q_per_kv();
  const int32_t tile_rows = std::max(1, options.max_lanes / std::max(1, gq));
  const int64_t min_chunk = std::max<int64_t>(kAttentionBlock, options.min_chunk_entries);

  // Pass 1: tiles = (sequence, head group or KV head, rows) and their cost (entries x lanes).
  struct Tile {
    int32_t seq, head_begin, head_end, row_begin, row_end;
    int64_t length;  // entries the tile's longest head shows its last (latest) row
    int64_t cost;
  };
  std::vector<Tile> tiles;
  int64_t total_cost = 0;
  for_each_attention_tile(
      batch, options.whole_groups, tile_rows,
      [&](int32_t s, int32_t hb, int32_t he, int32_t r0, int32_t r1) {
        const AttentionSequence& seq = batch.seqs[static_cast<size_t>(s)];
        Tile t{s, hb, he, r0, r1, 0, 0};
        for (int32_t i = hb; i < he; ++i) {
          const int64_t len =
              batch.head(s, batch.head_order[batch.at(s, i)]).visible(seq.pos0 + r1 - 1);
          t.length = std::max(t.length, len);
          t.cost += len * (r1 - r0) * gq;
        }
        tiles.push_back(t);
        total_cost += t.cost;
      });
  // Pass 2: cut long tiles so that every thread gets about items_per_thread items.
  const int64_t wanted_items =
      int64_t{std::max(1, n_threads)} * std::max(1, options.items_per_thread);
  const int64_t target_cost = std::max<int64_t>(1, (total_cost + wanted_items - 1) / wanted_items);
  for (const Tile& t : tiles) {
    const int64_t lanes = lanes_of(batch, t.head_begin, t.head_end, t.row_begin, t.row_end);
    int64_t parts = 1;
    if (n_threads > 1 && t.length > min_chunk) {
      parts = (t.cost + target_cost - 1) / target_cost;
      parts = std::clamp<int64_t>(parts, 1, (t.length + min_chunk - 1) / min_chunk);
    }
    AttentionWork w{t.seq, t.head_begin, t.head_end, t.row_begin, t.row_end, 0, t.length, -1, 0};
    if (parts == 1) {
      plan.work.push_back(w);
      continue;
    }
    const int64_t per_blocks = (t.length + parts * kAttentionBlock - 1) / (parts * kAttentionBlock);
    const int64_t chunk = per_blocks * kAttentionBlock;
    parts = (t.length + chunk - 1) / chunk;
    w.merge = static_cast<int32_t>(plan.merges.size());
    plan.merges.push_back({t.seq, t.head_begin, t.head_end, t.row_begin, t.row_end,
                           plan.n_partial_slots, static_cast<int32_t>(parts)});
    for (int64_t k = 0; k < parts; ++k) {
      w.entry_begin = k * chunk;
      w.entry_end = std::min(t.length, (k + 1) * chunk);
      w.partial = plan.n_partial_slots + k * lanes;
      plan.work.push_back(w);
    }
    plan.n_partial_slots += parts * lanes;
  }
  // Costliest first, so threads taking items in order finish together.
  auto cost = [&](const AttentionWork& w) {
    return (w.entry_end - w.entry_begin) *
           lanes_of(batch, w.head_begin, w.head_end, w.row_begin, w.row_end);
  };
  std::stable_sort(
      plan.work.begin(), plan.work.end(),
      [&](const AttentionWork& a, const AttentionWork& b) { return cost(a) > cost(b); });
}

Status validate_attention_plan(const AttentionBatch& batch, const AttentionPlan& plan) {
  const size_t n_heads = batch.seqs.size() * sz(batch.n_kv_head);
  if (batch.n_kv_head < 1 || batch.n_head % batch.n_kv_head != 0 || batch.head_dim < 1 ||
      batch.head_dim_v < 1 || batch.heads.size() != n_heads || batch.head_order.size() != n_heads ||
      batch.group_start.size() != n_heads)
    return make_error("attention plan: the batch is malformed");
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    std::vector<uint8_t> seen(sz(batch.n_kv_head), 0);
    for (int32_t i = 0; i < batch.n_kv_head; ++i) {
      const int32_t h = batch.head_order[batch.at(static_cast<int32_t>(s), i)];
      if (h < 0 || h >= batch.n_kv_head || seen[sz(h)])
        return make_error("attention plan: the batch's head order of sequence {} is no permutation",
                          s);
      seen[sz(h)] = 1;
    }
  }
  if (plan.n_partial_slots < 0) return make_error("attention plan: negative partial slot count");
  std::vector<int32_t> parts_seen(plan.merges.size(), 0);
  for (size_t i = 0; i < plan.work.size(); ++i) {
    const AttentionWork& w = plan.work[i];
    if (w.seq < 0 || sz(w.seq) >= batch.seqs.size() || w.head_begin < 0 ||
        w.head_begin >= w.head_end || w.head_end > batch.n_kv_head || w.row_begin < 0 ||
        w.row_begin >= w.row_end || w.row_end > batch.seqs[sz(w.seq)].n_rows || w.entry_begin < 0 ||
        w.entry_end < w.entry_begin)
      return make_error("attention plan: work item {} is out of range", i);
    if (w.merge >= 0) {
      if (sz(w.merge) >= plan.merges.size())
        return make_error("attention plan: work item {} names merge {} of {}", i, w.merge,
                          plan.merges.size());
      const AttentionMerge& mg = plan.merges[sz(w.merge)];
      if (mg.seq != w.seq || mg.head_begin != w.head_begin || mg.head_end != w.head_end ||
          mg.row_begin != w.row_begin || mg.row_end != w.row_end)
        return make_error("attention plan: work item {} does not match its merge", i);
      const int64_t lanes = lanes_of(batch, w.head_begin, w.head_end, w.row_begin, w.row_end);
      if (w.partial < mg.first_partial || (w.partial - mg.first_partial) % lanes != 0 ||
          (w.partial - mg.first_partial) / lanes >= mg.n_parts ||
          w.partial + lanes > plan.n_partial_slots)
        return make_error("attention plan: work item {} has a bad partial slot", i);
      ++parts_seen[sz(w.merge)];
    } else if (w.merge != -1) {
      return make_error("attention plan: work item {} names merge {}", i, w.merge);
    }
  }
  for (size_t m = 0; m < plan.merges.size(); ++m)
    if (parts_seen[m] != plan.merges[m].n_parts || plan.merges[m].n_parts < 1)
      return make_error("attention plan: merge {} expects {} parts, the plan has {}", m,
                        plan.merges[m].n_parts, parts_seen[m]);
  if (!plan.thread_begin.empty()) {
    if (plan.thread_begin.front() != 0 || sz(plan.thread_begin.back()) != plan.work.size() ||
        !std::is_sorted(plan.thread_begin.begin(), plan.thread_begin.end()))
      return make_error("attention plan: the thread assignment does not cover the work list");
  }
  return Status::Ok();
}

Status run_attention(const AttentionBatch& batch, const AttentionPlan& plan, ThreadPool& pool,
                     AttentionWorkspace& ws) {
  TG_TRY(validate_attention_plan(batch, plan));
  if (plan.work.empty()) return Status::Ok();
  if (!size_workspace(batch, plan, pool.size(), ws))
    return make_error("attention: out of host memory for the workspace");
  for (size_t m = 0; m < plan.merges.size(); ++m)
    ws.merge_left[m].store(plan.merges[m].n_parts, std::memory_order_relaxed);

  const bool fixed = plan.thread_begin.size() == sz(pool.size()) + 1;
  if (fixed) ws.ranges.reset(plan.thread_begin);
  std::atomic<size_t> next{0};
  auto body = [&](int thread, int) {
    AttentionWorkspace::Thread& th = ws.threads[sz(thread)];
    if (fixed) {  // its own items, then what another thread has not started (work_ranges.h)
      for (int32_t i = ws.ranges.take(thread); i >= 0; i = ws.ranges.take(thread))
        run_work(batch, plan, plan.work[sz(i)], th, ws);
      return;
    }
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < plan.work.size();
         i = next.fetch_add(1, std::memory_order_relaxed))
      run_work(batch, plan, plan.work[i], th, ws);
  };
  if (pool.size() == 1 || (plan.work.size() == 1 && !fixed)) {
    body(0, 1);
  } else {
    pool.run(body);
  }
  return Status::Ok();
}

Status paged_attention(int layer, std::span<const AttentionItem> items, ThreadPool& pool,
                       AttentionWorkspace& ws) {
  TG_TRY(build_attention_batch(layer, items, ws.batch));
  try {
    plan_attention(ws.batch, pool.size(), ws.plan);
  } catch (const std::bad_alloc&) {
    return make_error("attention: out of host memory for the work plan");
  }
  return run_attention(ws.batch, ws.plan, pool, ws);
}

Status attend_sequence(const KvCache& cache, int layer, const float* q, int64_t n, int64_t pos0,
                       float* out, ThreadPool& pool, AttentionWorkspace& ws) {
  const AttentionItem item{&cache, q, out, n, pos0};
  return paged_attention(layer, std::span<const AttentionItem>(&item, 1), pool, ws);
}

}  // namespace tangram
