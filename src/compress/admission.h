// How many pages a request must find free to be admitted, by KV policy.
//
//   - full KV reserves its first chunk;
//   - the compressing policies other than tangram reserve the whole uncompressed prompt (as the
//     reference implementations hold it before they compress);
//   - tangram reserves up to its first compression point, and admits deterministically: the
//     request's whole footprint until it ends, in closed form from its lengths and the budgets
//     (committed_pages), must fit beside what the running requests are committed to, so that
//     none of them is preempted later.
// Every rule but a lone request's keeps `watermark` pages (one per head group) free for the
// running requests' growth.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "compress/compressor.h"
#include "kv/paged_kv_cache.h"

namespace tangram {

// What admission knows of a sequence.
struct AdmissionView {
  const PagedKvCache* cache = nullptr;  // its cache (never null)
  int64_t end = 0;                      // tokens of its input: prompt and what it generated
  int64_t compress_base = 0;            // positions at its last compression point
  int64_t next_point = -1;              // its next compression point (-1: not compressed now)
  int64_t max_new = 0;                  // tokens it may still generate
};

class AdmissionRule {
 public:
  // The compressor must outlive the rule; pages hold `page_tokens` positions.
  static std::unique_ptr<AdmissionRule> for_policy(const Compressor& compressor,
                                                   int64_t page_tokens);
  virtual ~AdmissionRule() = default;

  // Positions a request reserves when admitted for its first `chunk` tokens.
  virtual int64_t target(const AdmissionView& s, int64_t chunk) const = 0;
  // The most pages s can hold from now until its request ends; -1 when the rule does not
  // commit pages ahead (all but tangram).
  virtual int64_t committed_pages(const AdmissionView& s) const {
    (void)s;
    return -1;
  }
  // Pages that must be free to admit `candidate` for `chunk` tokens beside `running`, in a pool
  // of `total_pages`, keeping `watermark` pages for the others' growth.
  int64_t pages_to_admit(const AdmissionView& candidate, int64_t chunk,
                         std::span<const AdmissionView> running, int64_t watermark,
                         int64_t total_pages) const;
};

}  // namespace tangram
