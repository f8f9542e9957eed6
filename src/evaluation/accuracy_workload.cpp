#include "evaluation/accuracy_workload.h"

#include <algorithm>

namespace tangram {

Result<AccuracyWorkload> choose_accuracy_workload(std::span<const int32_t> tokens, int64_t context,
                                                  int64_t max_tokens) {
  if (context < kMinAccuracyWindow)
    return make_error("the model's context of {} tokens is below the {} an accuracy window needs",
                      context, kMinAccuracyWindow);
  if (max_tokens < kMinAccuracyWindow)
    return make_error("an accuracy window of {} tokens is below the {} it needs", max_tokens,
                      kMinAccuracyWindow);
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < kMinAccuracyWindow)
    return make_error("the accuracy text is {} tokens, shorter than the {} a window needs", n,
                      kMinAccuracyWindow);
  const int64_t window = std::min({n, context, max_tokens});
  AccuracyWorkload w;
  w.text_tokens = n;
  w.text.assign(tokens.begin(), tokens.begin() + window);
  // Four turns: three compressions happen before the last turn is read, as in a conversation.
  w.chunk = window / 4;
  const int64_t continuation = std::min<int64_t>(64, window / 4);
  w.context.assign(w.text.begin(), w.text.end() - continuation);
  w.continuation.assign(w.text.end() - continuation, w.text.end());
  w.n_generate = static_cast<int>(std::min<int64_t>(16, continuation));
  return w;
}

double effective_retention(double bytes_per_token, double full_bytes_per_token,
                           double measured_fallback) {
  if (bytes_per_token > 0 && full_bytes_per_token > 0)
    return bytes_per_token / full_bytes_per_token;
  return measured_fallback;
}

std::vector<PlotSeries> retention_series(const std::vector<AccuracyPoint>& points) {
  std::vector<NamedPoint> named;
  for (const AccuracyPoint& p : points) named.push_back({p.series, p.retention, p.mean_kl});
  return series_by_name(named);
}

}  // namespace tangram
