// The accuracy workload of `tangram bench`: text the model can know, cut to fit its context,
// and the Pareto view of what each policy's retention costs.
//
// Accuracy figures mean something only on text in the model's domain and within the context
// it was trained for: random token ids, or a conversation longer than the training context,
// make every policy (full KV included) look equally bad. So the bench reads a natural-language
// text (by default docs/accuracy-text.txt, short children's stories compiled into the binary,
// or --accuracy-text), and choose_accuracy_workload() cuts it to what the model's context and
// the accuracy budget allow: one teacher-forced window for perplexity and KL, read in turns as
// serving reads a conversation, and a context + continuation split of the same tokens for the
// greedy-agreement probe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/svg_plot.h"

namespace tangram {

// The built-in accuracy text: docs/accuracy-text.txt, embedded at build time.
std::string_view default_accuracy_text();

struct AccuracyWorkload {
  std::vector<int32_t> text;     // the window read teacher-forced (BOS first when the text has one)
  int64_t chunk = 0;             // tokens per turn of that read (about a quarter of the window)
  std::vector<int32_t> context;  // greedy agreement: prefilled, then compressed once
  std::vector<int32_t> continuation;  // teacher-forced after the context for its KL
  int n_generate = 0;                 // greedy tokens compared after the context
  int64_t text_tokens = 0;            // tokens of the whole text before the cut
};

// Shortest window worth measuring: below it a compressed cache is mostly sink and recent window.
inline constexpr int64_t kMinAccuracyWindow = 64;

// Cuts `tokens` (the encoded text, BOS first when the tokenizer adds one) to a window of
// min(tokens, context, max_tokens) tokens. The greedy probe takes the window's last quarter (at
// most 64 tokens) as its continuation and generates at most 16 tokens, so context plus either
// stays inside the window and so inside the model's context.
// Errors: context or max_tokens < kMinAccuracyWindow, or a text shorter than that.
Result<AccuracyWorkload> choose_accuracy_workload(std::span<const int32_t> tokens, int64_t context,
                                                  int64_t max_tokens);

// One (policy, ratio) of the accuracy table, placed for the Pareto view.
struct AccuracyPoint {
  std::string series;      // the policy (and head-group size when tangram ran with several)
  double retention = 1.0;  // effective retention (see effective_retention)
  double mean_kl = 0.0;    // nats, KL(p_full || p_policy) over the teacher-forced window
};

// A policy's effective retention: its bytes per cached token over full KV's when both were
// measured (> 0) in the serving run, else `measured_fallback` (the bytes the accuracy run's cache
// held over full's).
double effective_retention(double bytes_per_token, double full_bytes_per_token,
                           double measured_fallback);

// One series per point series, in order of first appearance, each sorted by retention, so a
// line joins a policy's ratios from the least kept to the most (the caller places full KV at (1,
// 0)).
std::vector<PlotSeries> retention_series(const std::vector<AccuracyPoint>& points);

}  // namespace tangram
