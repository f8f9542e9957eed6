#include "compress/compressor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "compress/budgets.h"
#include "compress/cluster.h"
#include "compress/profile.h"
#include "kv/kv_head_view.h"
#include "kv/kv_row.h"
#include "model/rope.h"

namespace tangram {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Reads `count` stored rows of `dim` elements (a page run: packed, since PageGeometry's row
// sizes are kv_row_bytes(type, dim)) as floats in one call, since a call per row cost more
// than the conversion on 8-element heads.
void read_rows(const uint8_t* src, int64_t count, int dim, KvType type, float* dst) {
  load_kv_row(type, src, dst, count * dim);
}

// Per-thread buffers for reading a head back and gathering its GQA group's queries.
struct Scratch {
  std::vector<uint8_t> key_rows;  // [n][key row bytes]: the stored keys as plain rows (kv_row.h)
  std::vector<float> keys;        // [n][head_dim]
  std::vector<float> values;      // [n][head_dim_v]
  std::vector<float> queries;     // [n_queries][q_per_kv][head_dim]
  std::vector<int32_t> query_positions;  // [n_queries]
};

}  // namespace

Compressor::~Compressor() = default;

Result<std::unique_ptr<Compressor>> Compressor::create(const CompressionOptions& options,
                                                       const ModelConfig& config, const Rope& rope,
                                                       int group_size) {
  TG_TRY(options.validate());
  std::unique_ptr<Compressor> c(new Compressor());
  c->options_ = options;
  c->config_ = config;
  c->rope_ = &rope;
  TG_ASSIGN(c->scorer_, make_scorer(options.scorer));
  const int L = config.n_layers, H = config.n_kv_head;
  const bool tangram = options.policy == KvPolicy::Tangram;
  // group_size > 0: that many heads per page; 0: all of a layer's (unified); < 0: the policy's
  // layout (tangram 4, the others unified).
  const int G =
      group_size > 0 ? std::min(group_size, H) : (group_size < 0 && tangram ? std::min(4, H) : H);
  c->group_size_ = G;

  if (tangram && options.compresses()) {
    TG_ASSIGN(RetentionProfile profile, load_profile(options.profile));
    if (profile.n_kv_head != H || profile.n_layers != L)
      return make_error(
          "the profile {} covers {} layers x {} KV heads, the model has {} x {}: "
          "profile this model with `tangram profile`",
          options.profile, profile.n_layers, profile.n_kv_head, L, H);
    const std::vector<float> fractions = budget_fractions(profile, options.ratio, options.alpha);
    const std::vector<float> scores = budget_scores(profile, options.alpha);
    // Profiled layer i is physical layer layer_ids[i].
    c->fractions_.assign(static_cast<size_t>(L) * static_cast<size_t>(H), 0.0f);
    std::vector<float> physical_scores(c->fractions_.size());  // [L][H] mu + alpha·sigma
    for (int i = 0; i < L; ++i) {
      const int64_t phys = i < static_cast<int>(profile.layer_ids.size())
                               ? profile.layer_ids[static_cast<size_t>(i)]
                               : i;
      if (phys < 0 || phys >= L)
        return make_error("the profile names layer {}, the model has {}", phys, L);
      for (int h = 0; h < H; ++h) {
        c->fractions_[static_cast<size_t>(phys * H + h)] =
            fractions[static_cast<size_t>(i * H + h)];
        physical_scores[static_cast<size_t>(phys * H + h)] = scores[static_cast<size_t>(i * H + h)];
      }
    }
    ClusterMap cm;
    if (!options.cluster_map.empty()) {
      TG_ASSIGN(cm, load_cluster_map(options.cluster_map));
      if (cm.group_size != G)
        return make_error("the cluster map {} groups {} heads per page, --page-group-size is {}",
                          options.cluster_map, cm.group_size, G);
      if (cm.global && options.per_layer_groups)
        return make_error(
            "the cluster map {} groups heads across layers, --kv-group-scope is per-layer",
            options.cluster_map);
    } else {
      TG_ASSIGN(cm, cluster_heads(c->fractions_, L, H, G, /*global=*/!options.per_layer_groups));
    }
    if (options.budget_scaling == BudgetScaling::Footprint) {
      // Once per (profile, map, ratio): one factor on every mu + alpha·sigma so that what the
      // groups commit at the reference context (group maxima, sink, window) is `ratio` of full KV.
      const std::vector<std::vector<int>> groups = cm.members();
      TG_ASSIGN(ScaledBudgets scaled,
                scale_budgets_to_ratio(physical_scores, groups, options.ratio,
                                       options.budget_reference(), options.sink, options.window));
      c->fractions_ = std::move(scaled.fractions);
    }
    std::vector<int64_t> ids(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) ids[static_cast<size_t>(l)] = l;
    TG_ASSIGN(HeadGroupMap map, to_head_group_map(cm, L, ids));
    c->map_ = std::make_shared<const HeadGroupMap>(std::move(map));
    // Every member of a group keeps the group's (largest) budget: its pages are sized for it.
    c->group_fraction_.assign(c->fractions_.size(), 0.0f);
    for (int g = 0; g < c->map_->total_groups(); ++g) {
      const float most = c->map_->group_max(g, std::span<const float>(c->fractions_));
      for (const int f : c->map_->members(g)) c->group_fraction_[static_cast<size_t>(f)] = most;
    }
  } else {
    TG_ASSIGN(HeadGroupMap map, HeadGroupMap::contiguous(L, H, G));
    c->map_ = std::make_shared<const HeadGroupMap>(std::move(map));
  }
  return c;
}

int64_t Compressor::queries_wanted(int64_t total) const {
  if (!options_.compresses() || scorer_->query_source() == QuerySource::None) return 0;
  if (scorer_->query_source() == QuerySource::Reconstruction)
    return std::min(total, options_.reconstruction_tokens);
  return std::min(total, scorer_->queries_wanted(total));
}

float Compressor::budget_fraction(int layer, int kv_head) const {
  if (group_fraction_.empty()) return -1.0f;
  return group_fraction_[static_cast<size_t>(layer * config_.n_kv_head + kv_head)];
}

std::vector<int64_t> Compressor::target_lengths(int64_t total) const {
  const size_t n = static_cast<size_t>(config_.n_layers) * static_cast<size_t>(config_.n_kv_head);
  std::vector<int64_t> out;
  switch (options_.policy) {
    case KvPolicy::Dynamic:
      if (options_.compresses()) return out;
      [[fallthrough]];
    case KvPolicy::Full:
      out.assign(n, total);
      break;
    case KvPolicy::Uniform:
      out.assign(n, options_.compresses()
                        ? uniform_length(options_.ratio, total, options_.sink, options_.window)
                        : total);
      break;
    case KvPolicy::Tangram:
      out.resize(n);
      for (size_t i = 0; i < n; ++i)
        out[i] = options_.compresses()
                     ? budget_length(group_fraction_[i], total, options_.sink, options_.window)
                     : total;
      break;
  }
  return out;
}

int64_t Compressor::predicted_pages(int64_t total, int page_tokens) const {
  const std::vector<int64_t> len = target_lengths(total);
  if (len.empty()) return -1;
  int64_t pages = 0;
  for (int g = 0; g < map_->total_groups(); ++g) {
    const int64_t longest = map_->group_max(g, std::span<const int64_t>(len));
    pages += (longest + page_tokens - 1) / page_tokens;
  }
  return pages;
}

std::optional<Compressor::Retention> Compressor::retention_at(int64_t total) const {
  const std::vector<int64_t> kept = target_lengths(total);
  if (kept.empty()) return std::nullopt;
  const bool own_budgets = options_.compresses() && fractions_.size() == kept.size();
  Retention r;
  for (size_t i = 0; i < kept.size(); ++i) {
    r.kept += kept[i];
    r.own +=
        own_budgets ? budget_length(fractions_[i], total, options_.sink, options_.window) : kept[i];
  }
  r.full = static_cast<int64_t>(kept.size()) * total;
  return r;
}

Result<CompressionReport> Compressor::compress(PagedKvCache& cache, const float* queries,
                                               int64_t n_queries, int64_t query_pos0,
                                               ThreadPool& pool) const {
  const int L = config_.n_layers, H = config_.n_kv_head;
  const int qpk = config_.n_head / config_.n_kv_head;
  const int hd = config_.head_dim, hdv = config_.head_dim_v;
  const int64_t total = cache.n_positions();
  const auto n_heads = static_cast<size_t>(L) * static_cast<size_t>(H);
  CompressionReport rep;
  rep.total = total;
  rep.heads = static_cast<int64_t>(n_heads);
  rep.pages_before = cache.pages_held();
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) rep.entries_before += cache.length(l, h);
  rep.entries_after = rep.entries_before;
  rep.pages_after = rep.pages_before;
  if (!options_.compresses()) return rep;
  if (scorer_->query_source() != QuerySource::None && (queries == nullptr || n_queries < 1))
    return make_error("the {} scorer needs queries; none were captured", scorer_->name());

  // 1. Score every head, in parallel over heads.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> scores(n_heads);       // [L*H][n]
  std::vector<std::vector<int32_t>> positions(n_heads);  // [L*H][n]
  std::vector<Scratch> scratch(static_cast<size_t>(pool.size()));
  std::vector<Status> errors(static_cast<size_t>(pool.size()));
  pool.parallel_for(
      static_cast<int64_t>(n_heads),
      [&](int64_t b, int64_t e, int tid) {
        Scratch& s = scratch[static_cast<size_t>(tid)];
        for (int64_t i = b; i < e && errors[static_cast<size_t>(tid)].ok(); ++i) {
          const int l = static_cast<int>(i / H), h = static_cast<int>(i % H);
          const KvHeadView v = cache.head_view(l, h);
          const int64_t n = v.length;
          auto& sc = scores[static_cast<size_t>(i)];
          auto& pos = positions[static_cast<size_t>(i)];
          sc.resize(static_cast<size_t>(n));
          pos.resize(static_cast<size_t>(n));
          s.keys.resize(static_cast<size_t>(n) * static_cast<size_t>(hd));
          s.values.resize(static_cast<size_t>(n) * static_cast<size_t>(hdv));
          s.key_rows.resize(static_cast<size_t>(n) * v.k_row_bytes);
          v.copy_keys(0, n, s.key_rows.data());
          if (n > 0)
            read_rows(s.key_rows.data(), n, hd, cache.type(),
                      s.keys.data());  // (no rows: no pointers)
          v.for_each_run(0, n,
                         [&](int64_t first, const uint8_t*, const uint8_t* val, int64_t count) {
                           read_rows(val, count, hdv, cache.type(), s.values.data() + first * hdv);
                         });
          for (int64_t j = 0; j < n; ++j)
            pos[static_cast<size_t>(j)] =
                static_cast<int32_t>(j < v.n_kept ? v.kept_pos[j] : v.tail_pos0 + (j - v.n_kept));
          HeadScoreInput in;
          in.layer = l;
          in.kv_head = h;
          in.head_dim = hd;
          in.head_dim_v = hdv;
          in.n = n;
          in.keys = s.keys.data();
          in.values = s.values.data();
          in.positions = pos.data();
          in.q_per_kv = qpk;
          in.rope = rope_;
          in.next_position = total;
          if (queries != nullptr && n_queries > 0) {
            const size_t row = static_cast<size_t>(qpk) * static_cast<size_t>(hd);
            s.queries.resize(static_cast<size_t>(n_queries) * row);
            s.query_positions.resize(static_cast<size_t>(n_queries));
            for (int64_t r = 0; r < n_queries; ++r) {
              const float* src =
                  queries + ((static_cast<int64_t>(l) * n_queries + r) * config_.n_head +
                             static_cast<int64_t>(h) * qpk) *
                                hd;
              std::copy_n(src, row, s.queries.data() + static_cast<size_t>(r) * row);
              s.query_positions[static_cast<size_t>(r)] = static_cast<int32_t>(query_pos0 + r);
            }
            in.n_queries = n_queries;
            in.queries = s.queries.data();
            in.query_positions = s.query_positions.data();
          }
          if (Status st = scorer_->score(in, sc.data()); !st.ok())
            errors[static_cast<size_t>(tid)] = st;
        }
      },
      1);
  for (const Status& st : errors) TG_TRY(st);
  rep.score_seconds = seconds_since(t0);

  // 2. Lengths per head from the policy.
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<HeadScores> views(n_heads);
  for (size_t i = 0; i < n_heads; ++i) views[i] = HeadScores{scores[i], positions[i]};
  std::vector<int64_t> lengths;
  if (options_.policy == KvPolicy::Dynamic) {
    lengths = dynamic_lengths(views, L, H, total, options_.ratio, options_.sink, options_.window,
                              options_.level);
  } else {
    lengths = target_lengths(total);
    if (options_.policy == KvPolicy::Tangram) {
      // Budget pressure: would the run-time spread have given a head more than its budget?
      const std::vector<int64_t> wanted =
          dynamic_lengths(views, L, H, total, options_.ratio, options_.sink, options_.window,
                          BudgetLevel::PerLayer);
      for (size_t i = 0; i < n_heads; ++i) rep.pressured_heads += wanted[i] > lengths[i] ? 1 : 0;
    }
  }

  // 3. Keep, compact, release whole pages.
  std::vector<int64_t> keep;
  for (size_t i = 0; i < n_heads; ++i) {
    const int l = static_cast<int>(i / static_cast<size_t>(H)),
              h = static_cast<int>(i % static_cast<size_t>(H));
    const auto n = static_cast<int64_t>(scores[i].size());
    if (lengths[i] >= n) continue;
    select_keep(scores[i], positions[i], total, options_.sink, options_.window, lengths[i], keep);
    TG_TRY(cache.compact_head(l, h, keep));
  }
  cache.release_unused_pages();
  rep.compact_seconds = seconds_since(t1);
  rep.pages_after = cache.pages_held();
  rep.entries_after = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) rep.entries_after += cache.length(l, h);
  return rep;
}

}  // namespace tangram
