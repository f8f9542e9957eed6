// Synthetic KV contexts for KV-bound decode benchmarks (`tangram bench-model --context N`).
//
// Filling 16 sequences to 8K tokens through prefill would take about an hour on a small CPU; the
// decode step's cost depends only on how many rows each head holds and how its pages are laid
// out, not on what the rows contain. So each sequence's cache is filled directly: every (layer,
// KV head) gets the length its policy would leave after compressing a context of N tokens, and
// rows of random values are written straight into the pages (PagedKvCache::restore). The
// lengths per policy:
//   full     every head N, unified pages (all KV heads of a layer share a page);
//   uniform  the Compressor's target_lengths: sink + ceil(ratio x (N - sink)), unified pages;
//   dynamic  the uniform total of each layer spread over its heads in proportion to the
//            profile's per-head budgets, through the run-time spread itself (dynamic_lengths)
//            fed synthetic scores whose ranks fall off at a rate set by each head's budget, so
//            that a head's share is what real scores correlated with the profile would give it;
//            unified pages (a deterministic stand-in: real dynamic lengths come from the scores
//            of the request);
//   tangram  the Compressor's target_lengths and head-group map (G heads per page), with the
//            ratio it is given fitted (bisection) so the sequence holds no more page memory
//            (head-token slots) than uniform's at the requested ratio: equal effective retention,
//            whatever budget scaling the profile implies. The fitted ratio is reported.
// A kept head holds its sink and its recent window as compression leaves them; the entries in
// between are spread evenly over the evicted range (their positions matter only for causal
// masking, which a decode row passes for all).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "compress/kv_policy.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "model/config.h"

namespace tangram {

class Rope;

struct SyntheticKvOptions {
  int64_t context = 0;  // N: positions every sequence has seen
  double ratio = 0.25;  // retention the compressing policies are held to
  std::string profile;  // per-head profile matching the model's layers (dynamic, tangram)
  int tangram_group_size = 4;
  int page_tokens = 16;  // P of the pages the footprints are counted in
  int sink = CompressionOptions{}.sink;
  int window = CompressionOptions{}.window;
  double alpha = CompressionOptions{}.alpha;
};

// What one policy leaves in a sequence of `context` positions.
struct SyntheticKvLayout {
  KvPolicy policy = KvPolicy::Full;
  double compressor_ratio = 1.0;  // the ratio the Compressor was given (tangram: fitted)
  std::vector<int64_t> lengths;   // [n_layers][n_kv_head] entries per head
  std::shared_ptr<const HeadGroupMap> map;
  int group_size = 0;  // KV heads per page

  // Pages one sequence of this layout holds: each group's longest head, in pages of P tokens.
  int64_t footprint_pages(int page_tokens) const;
  // Head-token slots of those pages (pages x P x G): page memory, comparable across group sizes.
  int64_t footprint_slots(int page_tokens) const;
  // Entries over all (layer, KV head).
  int64_t total_entries() const;
};

// The lengths and page layout of a policy. Errors: a context below 1, a ratio outside (0, 1],
// a profile that cannot be read or does not match the model (dynamic, tangram).
Result<SyntheticKvLayout> synthetic_kv_layout(KvPolicy policy, const ModelConfig& config,
                                              const Rope& rope, const SyntheticKvOptions& options);

// Writes the layout into an empty cache of the model's shape whose map is layout.map: every head
// its length of random rows (seeded) at the positions compression would have kept, the cache at
// `context` positions, no page held beyond the footprint. Errors: the cache is not empty, has
// another map, or its pool lacks free pages.
Status fill_synthetic_kv(PagedKvCache& cache, const SyntheticKvLayout& layout, int64_t context,
                         const SyntheticKvOptions& options, uint32_t seed);

}  // namespace tangram
