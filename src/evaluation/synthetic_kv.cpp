#include "evaluation/synthetic_kv.h"

#include <algorithm>
#include <random>

#include "compress/budgets.h"
#include "compress/compressor.h"
#include "compress/profile.h"
#include "kv/kv_row.h"

namespace tangram {

namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

Result<std::unique_ptr<Compressor>> make_compressor(KvPolicy policy, double ratio,
                                                    const ModelConfig& config, const Rope& rope,
                                                    const SyntheticKvOptions& o, int group) {
  CompressionOptions c;
  c.policy = policy;
  c.ratio = ratio;
  c.sink = o.sink;
  c.window = o.window;
  c.alpha = o.alpha;
  c.profile = o.profile;
  return Compressor::create(c, config, rope, group);
}

// The Compressor's lengths and map for a length-deterministic policy at `ratio`.
Result<SyntheticKvLayout> compressor_layout(KvPolicy policy, double ratio,
                                            const ModelConfig& config, const Rope& rope,
                                            const SyntheticKvOptions& o, int group) {
  TG_ASSIGN(std::unique_ptr<Compressor> c, make_compressor(policy, ratio, config, rope, o, group));
  SyntheticKvLayout out;
  out.policy = policy;
  out.compressor_ratio = ratio;
  out.lengths = c->target_lengths(o.context);
  out.map = c->group_map();
  out.group_size = c->group_size();
  return out;
}

// Tangram at the largest ratio (to 1e-3) whose footprint fits in `slots` head-token slots.
Result<SyntheticKvLayout> fitted_tangram_layout(int64_t slots, const ModelConfig& config,
                                                const Rope& rope, const SyntheticKvOptions& o) {
  const int group = std::min(o.tangram_group_size, config.n_kv_head);
  TG_ASSIGN(SyntheticKvLayout best,
            compressor_layout(KvPolicy::Tangram, 1.0, config, rope, o, group));
  if (best.footprint_slots(o.page_tokens) <= slots) return best;
  double lo = 0.0, hi = 1.0;  // footprint(lo) fits (or lo = 0), footprint(hi) does not
  bool found = false;
  while (hi - lo > 1e-3) {
    const double mid = (lo + hi) / 2;
    TG_ASSIGN(SyntheticKvLayout l,
              compressor_layout(KvPolicy::Tangram, mid, config, rope, o, group));
    if (l.footprint_slots(o.page_tokens) <= slots) {
      lo = mid;
      best = std::move(l);
      found = true;
    } else {
      hi = mid;
    }
  }
  if (!found) {  // not even the smallest ratio fits: the nearest above it
    TG_ASSIGN(best, compressor_layout(KvPolicy::Tangram, hi, config, rope, o, group));
  }
  return best;
}

// Uniform's per-layer totals spread in proportion to the profile's per-head budgets, through the
// run-time spread: head i's evictable entry j scores -j / budget_i, so pooling the layer's
// scores and keeping the highest gives each head a share proportional to its budget.
Result<SyntheticKvLayout> dynamic_layout(const ModelConfig& config, const SyntheticKvOptions& o) {
  TG_ASSIGN(RetentionProfile profile, load_profile(o.profile));
  const int L = config.n_layers, H = config.n_kv_head;
  if (profile.n_layers != L || profile.n_kv_head != H)
    return make_error("the profile {} covers {} layers x {} KV heads, the model has {} x {}",
                      o.profile, profile.n_layers, profile.n_kv_head, L, H);
  const std::vector<float> budget = budget_fractions(profile, o.ratio, o.alpha);
  const int64_t n = o.context;
  std::vector<int32_t> positions(sz(n));
  for (int64_t j = 0; j < n; ++j) positions[sz(j)] = static_cast<int32_t>(j);
  std::vector<std::vector<float>> scores(sz(int64_t{L} * H), std::vector<float>(sz(n)));
  std::vector<HeadScores> heads;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float w = std::max(1e-4f, i < budget.size() ? budget[i] : 1.0f);
    for (int64_t j = 0; j < n; ++j) scores[i][sz(j)] = -static_cast<float>(j) / w;
    heads.push_back(HeadScores{scores[i], positions});
  }
  SyntheticKvLayout out;
  out.policy = KvPolicy::Dynamic;
  out.compressor_ratio = o.ratio;
  out.lengths = dynamic_lengths(heads, L, H, n, o.ratio, o.sink, o.window, BudgetLevel::PerLayer);
  TG_ASSIGN(HeadGroupMap map, HeadGroupMap::contiguous(L, H, H));
  out.map = std::make_shared<const HeadGroupMap>(std::move(map));
  out.group_size = H;
  return out;
}

// Positions a head of `length` entries keeps out of `context`: its sink, then entries spread
// evenly over the evicted middle (kept_pos), then its recent window (the tail from tail_pos0).
void kept_positions(int64_t length, int64_t context, int sink, int window,
                    std::vector<int32_t>& kept, int64_t& tail_pos0) {
  kept.clear();
  if (length >= context) {
    tail_pos0 = 0;
    return;
  }
  const int64_t tail = std::min<int64_t>(length, window);
  tail_pos0 = context - tail;
  const int64_t middle = length - tail;
  const int64_t sinks = std::min<int64_t>(middle, sink);
  for (int64_t p = 0; p < sinks; ++p) kept.push_back(static_cast<int32_t>(p));
  const int64_t spread = middle - sinks, span = tail_pos0 - sinks;  // spread <= span
  for (int64_t i = 0; i < spread; ++i)
    kept.push_back(static_cast<int32_t>(sinks + i * span / spread));
}

// n rows of `dim` random values in [-1, 1], stored as `type`: [n][row bytes].
std::vector<uint8_t> random_rows(int64_t n, int dim, KvType type, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t row_bytes = kv_row_bytes(type, dim);
  std::vector<uint8_t> rows(sz(n) * row_bytes);
  std::vector<float> row(sz(dim));
  for (int64_t r = 0; r < n; ++r) {
    for (float& x : row) x = dist(rng);
    store_kv_row(type, row.data(), rows.data() + sz(r) * row_bytes, dim);
  }
  return rows;
}

}  // namespace

int64_t SyntheticKvLayout::footprint_pages(int page_tokens) const {
  int64_t pages = 0;
  for (int g = 0; g < map->total_groups(); ++g) {
    const int64_t longest = map->group_max(g, std::span<const int64_t>(lengths));
    pages += (longest + page_tokens - 1) / page_tokens;
  }
  return pages;
}

int64_t SyntheticKvLayout::footprint_slots(int page_tokens) const {
  return footprint_pages(page_tokens) * page_tokens * group_size;
}

int64_t SyntheticKvLayout::total_entries() const {
  int64_t n = 0;
  for (const int64_t l : lengths) n += l;
  return n;
}

Result<SyntheticKvLayout> synthetic_kv_layout(KvPolicy policy, const ModelConfig& config,
                                              const Rope& rope, const SyntheticKvOptions& options) {
  if (options.context < 1)
    return make_error("a synthetic context needs at least 1 position, not {}", options.context);
  if (!(options.ratio > 0.0 && options.ratio <= 1.0))
    return make_error("the retention ratio must be in (0, 1], not {}", options.ratio);
  if (options.page_tokens < 1)
    return make_error("pages must hold at least 1 token, not {}", options.page_tokens);
  const int unified = config.n_kv_head;
  switch (policy) {
    case KvPolicy::Full:
      return compressor_layout(KvPolicy::Full, 1.0, config, rope, options, unified);
    case KvPolicy::Uniform:
      return compressor_layout(KvPolicy::Uniform, options.ratio, config, rope, options, unified);
    case KvPolicy::Dynamic:
      if (options.ratio >= 1.0) {
        TG_ASSIGN(SyntheticKvLayout l,
                  compressor_layout(KvPolicy::Full, 1.0, config, rope, options, unified));
        l.policy = KvPolicy::Dynamic;
        return l;
      }
      return dynamic_layout(config, options);
    case KvPolicy::Tangram: {
      TG_ASSIGN(SyntheticKvLayout uniform, compressor_layout(KvPolicy::Uniform, options.ratio,
                                                             config, rope, options, unified));
      return fitted_tangram_layout(uniform.footprint_slots(options.page_tokens), config, rope,
                                   options);
    }
  }
  return make_error("unknown KV policy");
}

Status fill_synthetic_kv(PagedKvCache& cache, const SyntheticKvLayout& layout, int64_t context,
                         const SyntheticKvOptions& options, uint32_t seed) {
  const KvShape& shape = cache.shape();
  const size_t n_heads = sz(int64_t{shape.n_layers} * shape.n_kv_head);
  if (layout.lengths.size() != n_heads)
    return make_error("synthetic KV: the layout is for another model");
  if (layout.map.get() != &cache.head_groups())
    return make_error("synthetic KV: the cache pages its heads by another map");
  const int64_t longest = *std::max_element(layout.lengths.begin(), layout.lengths.end());
  const PageGeometry& geo = cache.pool().geometry();
  // Every head restores from the same rows: [longest][row], keys and values.
  const std::vector<uint8_t> keys = random_rows(longest, geo.head_dim, geo.type, seed);
  const std::vector<uint8_t> values = random_rows(longest, geo.head_dim_v, geo.type, seed + 1);
  std::vector<std::vector<int32_t>> kept(n_heads);
  std::vector<PagedKvCache::HeadRestore> heads(n_heads);
  for (size_t i = 0; i < n_heads; ++i) {
    const int64_t length = std::min(layout.lengths[i], context);
    int64_t tail_pos0 = 0;
    kept_positions(length, context, options.sink, options.window, kept[i], tail_pos0);
    heads[i] = PagedKvCache::HeadRestore{length, kept[i], tail_pos0, keys.data(), values.data()};
  }
  return cache.restore(context, heads);
}

}  // namespace tangram
