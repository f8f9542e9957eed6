#include "compress/admission.h"

#include <algorithm>
#include <vector>

namespace tangram {

namespace {

class FullKvAdmission final : public AdmissionRule {
 public:
  int64_t target(const AdmissionView& s, int64_t chunk) const override {
    return s.cache->n_positions() + chunk;
  }
};

class WholePromptAdmission final : public AdmissionRule {
 public:
  int64_t target(const AdmissionView& s, int64_t chunk) const override {
    (void)chunk;
    return s.end;
  }
};

class TangramAdmission final : public AdmissionRule {
 public:
  TangramAdmission(const Compressor& compressor, int64_t page_tokens)
      : compressor_(compressor), page_tokens_(page_tokens) {}

  int64_t target(const AdmissionView& s, int64_t chunk) const override {
    return std::max(s.cache->n_positions() + chunk, s.next_point);
  }

  int64_t committed_pages(const AdmissionView& s) const override {
    const HeadGroupMap& map = *compressor_.group_map();
    const int64_t chunk = compressor_.options().chunk;
    const PagedKvCache& cache = *s.cache;
    const int H = map.n_kv_head();
    std::vector<int64_t> now(static_cast<size_t>(map.n_layers()) * static_cast<size_t>(H));
    for (int l = 0; l < map.n_layers(); ++l)
      for (int h = 0; h < H; ++h) now[static_cast<size_t>(l * H + h)] = cache.length(l, h);
    const int64_t pos = cache.n_positions();
    const bool compressing = s.next_point >= 0;
    int64_t peak = cache.pages_held();
    // Prefill intervals: the first grows what the cache holds now, later ones the compressed
    // length.
    if (compressing) {
      for (int64_t p = s.compress_base, first = 1; p < s.end; first = 0) {
        const int64_t next = std::min(s.end, p + chunk);
        const int64_t added = next - std::max(p, pos);
        if (added > 0)
          peak = std::max(peak, pages(first ? now : compressor_.target_lengths(p), added));
        p = next;
      }
    }
    // After the prompt: the compressed prompt plus every token the request may still generate.
    const std::vector<int64_t> after = compressing ? compressor_.target_lengths(s.end) : now;
    const int64_t grow = std::max<int64_t>(0, s.max_new) + (compressing ? 0 : s.end - pos);
    return std::max(peak, pages(after, grow));
  }

 private:
  // Pages of every group holding its longest head's `per_head` entries plus `added`.
  int64_t pages(const std::vector<int64_t>& per_head, int64_t added) const {
    const HeadGroupMap& map = *compressor_.group_map();
    const int64_t P = page_tokens_;
    int64_t n = 0;
    for (int g = 0; g < map.total_groups(); ++g)
      n += (map.group_max(g, std::span<const int64_t>(per_head)) + added + P - 1) / P;
    return n;
  }

  const Compressor& compressor_;
  int64_t page_tokens_;
};

}  // namespace

std::unique_ptr<AdmissionRule> AdmissionRule::for_policy(const Compressor& compressor,
                                                         int64_t page_tokens) {
  const CompressionOptions& co = compressor.options();
  if (!co.compresses()) return std::make_unique<FullKvAdmission>();
  if (co.policy == KvPolicy::Tangram)
    return std::make_unique<TangramAdmission>(compressor, page_tokens);
  return std::make_unique<WholePromptAdmission>();
}

int64_t AdmissionRule::pages_to_admit(const AdmissionView& candidate, int64_t chunk,
                                      std::span<const AdmissionView> running, int64_t watermark,
                                      int64_t total_pages) const {
  const PagedKvCache& cache = *candidate.cache;
  const int64_t reserve = cache.pages_needed(target(candidate, chunk));
  const int64_t commit = committed_pages(candidate);
  if (commit < 0) return reserve + (running.empty() ? 0 : watermark);
  // A footprint that never fits the pool whole falls back to the first reservation alone.
  if (commit - cache.pages_held() > total_pages) return reserve;
  int64_t outstanding = 0;
  for (const AdmissionView& r : running)
    if (const int64_t c = committed_pages(r); c >= 0)
      outstanding += std::max<int64_t>(0, c - r.cache->pages_held());
  return std::max(reserve + (running.empty() ? 0 : watermark),
                  outstanding + commit - cache.pages_held());
}

}  // namespace tangram
