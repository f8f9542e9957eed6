#include "attention/balanced_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <vector>

#include "attention/attention_kernel.h"

namespace tangram {

namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

// A tile: KV heads head_order[head_begin .. head_end) of one sequence with query rows
// [row_begin, row_end); its lanes' visible entry counts are limits[limit_begin .. limit_end)
// (one per (head, row), each standing for q_per_kv lanes).
struct Tile {
  int32_t seq, head_begin, head_end, row_begin, row_end;
  size_t limit_begin, limit_end;
  int64_t length;  // the largest limit: entries the tile covers
};

// Cost of entries [0, e) of a tile: lanes x entries each lane sees below e.
int64_t prefix_cost(const std::vector<int64_t>& limits, const Tile& t, int64_t e, int gq) {
  int64_t c = 0;
  for (size_t i = t.limit_begin; i < t.limit_end; ++i) c += std::min(e, limits[i]);
  return c * gq;
}

// Where the thread boundary that should fall at cost `boundary` goes inside the piece
// [a, tile end) that starts at cumulative cost `pos` (before its overhead): before the piece,
// after it, or at a cut in between (a multiple of kAttentionBlock leaving pieces of at least
// min_chunk entries), whichever lands nearest; an edge within `slack` wins over a cut.
struct Cut {
  bool before = false;  // the boundary goes before the piece
  int64_t entry = 0;    // else it goes after entry `entry` (the tile's length: after the piece)
};
Cut choose_cut(const std::vector<int64_t>& limits, const Tile& t, int gq, int64_t a, double pos,
               double boundary, double overhead, int64_t min_chunk, double slack) {
  const int64_t base = prefix_cost(limits, t, a, gq);
  auto end_cost = [&](int64_t e) {  // cumulative cost when the thread ends after [a, e)
    return pos + overhead + static_cast<double>(prefix_cost(limits, t, e, gq) - base);
  };
  const double err_before = std::abs(pos - boundary);
  const double err_after = std::abs(end_cost(t.length) - boundary);
  Cut best{err_before <= err_after, t.length};
  double best_err = std::min(err_before, err_after);
  if (best_err <= slack) return best;

  const int64_t block = kAttentionBlock;
  const int64_t lo = a + min_chunk;                           // a multiple of block
  const int64_t hi = (t.length - min_chunk) / block * block;  // the last allowed cut
  if (lo > hi) return best;
  // The first cut in [lo, hi] whose end cost reaches the boundary; it or the cut before it.
  int64_t first = lo / block, last = hi / block;
  while (first < last) {
    const int64_t mid = first + (last - first) / 2;
    if (end_cost(mid * block) >= boundary)
      last = mid;
    else
      first = mid + 1;
  }
  for (const int64_t e : {first * block, (first - 1) * block}) {
    if (e < lo || e > hi) continue;
    const double err = std::abs(end_cost(e) - boundary);
    if (err < best_err) {
      best_err = err;
      best = Cut{false, e};
    }
  }
  return best;
}

}  // namespace

int64_t predicted_work_cost(const AttentionBatch& batch, const AttentionWork& w,
                            int64_t item_overhead) {
  const AttentionSequence& seq = batch.seqs[sz(w.seq)];
  const int64_t begin = std::max<int64_t>(0, w.entry_begin);
  int64_t entries = 0;
  for (int32_t i = w.head_begin; i < w.head_end; ++i) {
    const KvHeadView& view = batch.head(w.seq, batch.head_order[batch.at(w.seq, i)]);
    for (int32_t r = w.row_begin; r < w.row_end; ++r) {
      const int64_t end = std::min(w.entry_end, view.visible(seq.pos0 + r));
      entries += std::max<int64_t>(0, end - begin);
    }
  }
  return entries * batch.q_per_kv() + item_overhead;
}

void plan_attention_balanced(const AttentionBatch& batch, int n_threads, AttentionPlan& plan,
                             const BalancedPlanOptions& options) {
  plan.work.clear();
  plan.merges.clear();
  plan.n_partial_slots = 0;
  plan.thread_begin.clear();
  const int n_thr = std::max(1, n_threads);
  const int gq = batch.q_per_kv();
  const int32_t tile_rows = std::max(1, options.max_lanes / std::max(1, gq));
  const int64_t block = kAttentionBlock;
  const int64_t min_chunk =
      (std::max<int64_t>(block, options.min_chunk_entries) + block - 1) / block * block;
  const int64_t overhead = std::max<int64_t>(0, options.item_overhead);

  // Pass 1: tiles and their lanes' visible entry counts. limits: [tiles][heads x rows].
  std::vector<Tile> tiles;
  std::vector<int64_t> limits;
  double total = 0.0;
  for_each_attention_tile(batch, options.whole_groups, tile_rows,
                          [&](int32_t s, int32_t hb, int32_t he, int32_t r0, int32_t r1) {
                            const AttentionSequence& seq = batch.seqs[sz(s)];
                            Tile t{s, hb, he, r0, r1, limits.size(), 0, 0};
                            int64_t cost = 0;
                            for (int32_t i = hb; i < he; ++i) {
                              const KvHeadView& view =
                                  batch.head(s, batch.head_order[batch.at(s, i)]);
                              for (int32_t r = r0; r < r1; ++r) {
                                const int64_t vis = view.visible(seq.pos0 + r);
                                limits.push_back(vis);
                                t.length = std::max(t.length, vis);
                                cost += vis * gq;
                              }
                            }
                            t.limit_end = limits.size();
                            tiles.push_back(t);
                            total += static_cast<double>(cost + overhead);
                          });

  // Pass 2: the prefix-sum cut. Boundary k sits at k x share on the line of tiles laid end to
  // end (each item costing its entries plus the overhead; every boundary assumed to add one
  // item). pos: cost laid out so far.
  const double share = (total + static_cast<double>(overhead) * (n_thr - 1)) / n_thr;
  const double slack = std::max(0.0, options.edge_slack) * share;
  plan.thread_begin.assign(sz(n_thr) + 1, 0);
  int thread = 1;  // the next boundary to place
  double pos = 0.0;
  std::vector<int64_t> cuts;  // entry starts of the current tile's pieces
  for (const Tile& t : tiles) {
    cuts.assign(1, 0);
    const int64_t full = prefix_cost(limits, t, t.length, gq);
    int64_t a = 0, done = 0;  // the current piece starts at entry a, after cost `done`
    bool open_piece = true;   // the piece [a, length) is not yet laid out
    while (thread < n_thr && thread * share < pos + static_cast<double>(overhead + full - done)) {
      const Cut cut = choose_cut(limits, t, gq, a, pos, thread * share,
                                 static_cast<double>(overhead), min_chunk, slack);
      const auto piece_item = static_cast<int32_t>(plan.work.size() + cuts.size() - 1);
      const int64_t e = cut.entry;
      if (cut.before) {  // the thread ends before this piece
        plan.thread_begin[sz(thread++)] = piece_item;
        continue;
      }
      const int64_t upto = prefix_cost(limits, t, e, gq);
      pos += static_cast<double>(overhead + upto - done);
      plan.thread_begin[sz(thread++)] = piece_item + 1;
      if (e >= t.length) {  // the thread ends after the whole piece
        open_piece = false;
        break;
      }
      cuts.push_back(e);
      a = e;
      done = upto;
    }
    if (open_piece) pos += static_cast<double>(overhead + full - done);

    const int64_t lanes = int64_t{t.head_end - t.head_begin} * (t.row_end - t.row_begin) * gq;
    AttentionWork w{t.seq,         t.head_begin, t.head_end, t.row_begin, t.row_end, 0,
                    kOpenEntryEnd, -1,           0};
    if (cuts.size() == 1) {
      plan.work.push_back(w);
      continue;
    }
    w.merge = static_cast<int32_t>(plan.merges.size());
    plan.merges.push_back({t.seq, t.head_begin, t.head_end, t.row_begin, t.row_end,
                           plan.n_partial_slots, static_cast<int32_t>(cuts.size())});
    for (size_t k = 0; k < cuts.size(); ++k) {
      w.entry_begin = cuts[k];
      w.entry_end = k + 1 < cuts.size() ? cuts[k + 1] : kOpenEntryEnd;
      w.partial = plan.n_partial_slots + static_cast<int64_t>(k) * lanes;
      plan.work.push_back(w);
    }
    plan.n_partial_slots += static_cast<int64_t>(cuts.size()) * lanes;
  }
  for (int k = thread; k <= n_thr; ++k)
    plan.thread_begin[sz(k)] = static_cast<int32_t>(plan.work.size());
}

void plan_attention_naive(const AttentionBatch& batch, int n_threads, AttentionPlan& plan) {
  AttentionPlanOptions options;
  options.whole_groups = true;
  options.min_chunk_entries = std::numeric_limits<int64_t>::max();  // never split a group
  plan_attention(batch, n_threads, plan, options);
  for (AttentionWork& w : plan.work) w.entry_end = kOpenEntryEnd;  // all merge-free, from 0
}

double plan_imbalance(const AttentionBatch& batch, const AttentionPlan& plan, int n_threads,
                      int64_t item_overhead) {
  const int n_thr = std::max(1, n_threads);
  std::vector<double> load(sz(n_thr), 0.0);
  if (plan.thread_begin.size() == sz(n_thr) + 1) {
    for (int t = 0; t < n_thr; ++t)
      for (int32_t i = plan.thread_begin[sz(t)]; i < plan.thread_begin[sz(t) + 1]; ++i)
        load[sz(t)] +=
            static_cast<double>(predicted_work_cost(batch, plan.work[sz(i)], item_overhead));
  } else {
    // Threads free up in order of their load; ties go to the lowest thread.
    using Slot = std::pair<double, int>;
    std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> free_at;
    for (int t = 0; t < n_thr; ++t) free_at.push({0.0, t});
    for (const AttentionWork& w : plan.work) {
      auto [busy, t] = free_at.top();
      free_at.pop();
      busy += static_cast<double>(predicted_work_cost(batch, w, item_overhead));
      load[sz(t)] = busy;
      free_at.push({busy, t});
    }
  }
  double total = 0.0, worst = 0.0;
  for (const double l : load) {
    total += l;
    worst = std::max(worst, l);
  }
  return total > 0.0 ? worst / (total / n_thr) : 1.0;
}

Status check_attention_coverage(const AttentionBatch& batch, const AttentionPlan& plan) {
  TG_TRY(validate_attention_plan(batch, plan));
  // Pieces per (sequence, head slot, row): [seq][n_kv_head][n_rows], flattened.
  struct Piece {
    int64_t begin, end;
    int32_t merge;
  };
  std::vector<size_t> first_lane(batch.seqs.size() + 1, 0);
  for (size_t s = 0; s < batch.seqs.size(); ++s)
    first_lane[s + 1] = first_lane[s] + sz(batch.n_kv_head) * sz(batch.seqs[s].n_rows);
  std::vector<std::vector<Piece>> pieces(first_lane.back());
  for (const AttentionWork& w : plan.work)
    for (int32_t i = w.head_begin; i < w.head_end; ++i)
      for (int32_t r = w.row_begin; r < w.row_end; ++r)
        pieces[first_lane[sz(w.seq)] + sz(i) * sz(batch.seqs[sz(w.seq)].n_rows) + sz(r)].push_back(
            {std::max<int64_t>(0, w.entry_begin), w.entry_end, w.merge});
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const AttentionSequence& seq = batch.seqs[s];
    for (int32_t i = 0; i < batch.n_kv_head; ++i) {
      const KvHeadView& view = batch.head(static_cast<int32_t>(s),
                                          batch.head_order[batch.at(static_cast<int32_t>(s), i)]);
      for (int64_t r = 0; r < seq.n_rows; ++r) {
        std::vector<Piece>& p = pieces[first_lane[s] + sz(i) * sz(seq.n_rows) + sz(r)];
        const int64_t visible = view.visible(seq.pos0 + r);
        if (p.empty())
          return make_error("coverage: sequence {} head slot {} row {} is in no item", s, i, r);
        const int32_t merge = p.front().merge;
        const bool one_merge =
            std::all_of(p.begin(), p.end(), [&](const Piece& x) { return x.merge == merge; });
        if ((merge < 0 && p.size() != 1) || !one_merge ||
            (merge >= 0 && p.size() != sz(plan.merges[sz(merge)].n_parts)))
          return make_error("coverage: sequence {} head slot {} row {} is written by {} items", s,
                            i, r, p.size());
        std::sort(p.begin(), p.end(),
                  [](const Piece& x, const Piece& y) { return x.begin < y.begin; });
        int64_t reached = 0;  // entries [0, reached) covered so far
        for (const Piece& x : p) {
          const int64_t b = std::min(x.begin, visible), e = std::min(x.end, visible);
          if (b < e && b != reached)
            return make_error("coverage: sequence {} head slot {} row {}: entries from {} are {}",
                              s, i, r, std::min(b, reached),
                              b < reached ? "covered twice" : "missed");
          reached = std::max(reached, e);
        }
        if (reached != visible)
          return make_error("coverage: sequence {} head slot {} row {}: entries {}..{} are missed",
                            s, i, r, reached, visible);
      }
    }
  }
  return Status::Ok();
}

}  // namespace tangram
