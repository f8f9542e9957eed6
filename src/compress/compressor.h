// Compression of one sequence's paged KV cache after a turn's prefill (or a prefill chunk).
//
// compress(): for every (layer, KV head) the stored entries are read back as floats and scored
// by the configured scorer; the policy turns scores into a length per head (uniform: the same
// share for all; dynamic: a run-time spread of the layer's / model's share by score; tangram:
// each head group's deterministic budget, the same for every member so no slot of its pages is
// left empty); each head keeps its sink, its recent window and its best-scoring other entries,
// moved to the front of its pages (PagedKvCache::compact_head); finally every group's trailing
// pages go back to the pool in bulk. Keys keep the RoPE rotation of their true position, so
// later tokens attend to them unchanged.
//
// For the tangram policy the footprint of a context of `total` tokens is a closed form
// (predicted_pages), which the scheduler admits against before the request runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "compress/kv_policy.h"
#include "compress/scorer.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "model/config.h"

namespace tangram {

class Rope;

struct CompressionReport {
  int64_t total = 0;           // context length compressed (positions)
  int64_t entries_before = 0;  // over all (layer, KV head)
  int64_t entries_after = 0;
  int64_t pages_before = 0;
  int64_t pages_after = 0;
  int64_t heads = 0;
  int64_t pressured_heads = 0;  // tangram: heads whose run-time share exceeded their budget
  double score_seconds = 0;     // scoring (and reading entries back)
  double compact_seconds = 0;   // selection, compaction and page release
};

class Compressor {
 public:
  // Loads the profile (tangram) and builds the scorer. group_size: KV heads per page for the
  // tangram policy (the other policies use unified pages). Errors: invalid options, a profile
  // or map that does not match the model's layers and KV heads.
  static Result<std::unique_ptr<Compressor>> create(const CompressionOptions& options,
                                                    const ModelConfig& config, const Rope& rope,
                                                    int group_size);
  ~Compressor();

  const CompressionOptions& options() const { return options_; }
  const Scorer& scorer() const { return *scorer_; }
  // The head groups pages use: unified for full/uniform/dynamic; for tangram, heads of similar
  // budget grouped (from --kv-cluster-map, else clustered from the profile: across layers, or
  // within each layer with --kv-group-scope per-layer).
  std::shared_ptr<const HeadGroupMap> group_map() const { return map_; }
  int group_size() const { return group_size_; }

  // Query rows the scorer wants when `total` positions are compressed (0: query-free).
  int64_t queries_wanted(int64_t total) const;

  // Length every head keeps after compressing `total` positions under a length-deterministic
  // policy (full, uniform, tangram): [n_layers][n_kv_head]. Empty for dynamic.
  std::vector<int64_t> target_lengths(int64_t total) const;
  // Pages a sequence holds right after compressing `total` positions (full: uncompressed), or -1
  // for dynamic (known only after scoring).
  int64_t predicted_pages(int64_t total, int page_tokens) const;
  // What a length-deterministic policy keeps at a context of `total` positions, summed over
  // heads: `kept` (every tangram head at its group's largest budget), `own` (each head at its
  // own budget; kept - own is the group's over-retention, 0 for the other policies) and
  // `full` (heads x total). nullopt for dynamic (known only after scoring).
  struct Retention {
    int64_t kept = 0, own = 0, full = 0;
  };
  std::optional<Retention> retention_at(int64_t total) const;
  // Deterministic budget fraction of a head (tangram), [0, 1]; -1 for other policies.
  float budget_fraction(int layer, int kv_head) const;

  // Compresses every head of `cache` (which has seen cache.n_positions() tokens).
  //   queries: [n_layers][n_queries][n_head][head_dim] for the positions query_pos0 ..
  //   query_pos0 + n_queries - 1 (the observation window or the reconstruction pass); may be
  //   null when the scorer is query-free.
  Result<CompressionReport> compress(PagedKvCache& cache, const float* queries, int64_t n_queries,
                                     int64_t query_pos0, ThreadPool& pool) const;

 private:
  Compressor() = default;
  CompressionOptions options_;
  ModelConfig config_;
  const Rope* rope_ = nullptr;
  std::unique_ptr<Scorer> scorer_;
  std::shared_ptr<const HeadGroupMap> map_;
  int group_size_ = 0;
  std::vector<float> fractions_;       // [n_layers][n_kv_head] tangram head budgets (scaled per
                                       // options_.budget_scaling)
  std::vector<float> group_fraction_;  // [n_layers][n_kv_head] max over the head's group
};

}  // namespace tangram
