#include "runtime/sampling_params.h"

#include <cmath>

namespace tangram {

namespace {

// NaN fails every comparison, so ranges are checked as "inside" rather than "outside".
bool in_closed_range(float v, float lo, float hi) { return v >= lo && v <= hi; }

}  // namespace

Status SamplingParams::validate() const {
  if (!in_closed_range(temperature, 0.0f, 100.0f)) {
    return make_error("temperature must be in [0, 100] (0 = greedy), got {}", temperature);
  }
  if (top_k < 0) return make_error("top_k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return make_error("top_p must be in (0, 1] (1 = off), got {}", top_p);
  }
  if (!in_closed_range(min_p, 0.0f, 1.0f)) {
    return make_error("min_p must be in [0, 1] (0 = off), got {}", min_p);
  }
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return make_error("repetition_penalty must be a finite number > 0 (1 = off), got {}",
                      repetition_penalty);
  }
  if (!in_closed_range(presence_penalty, -2.0f, 2.0f)) {
    return make_error("presence_penalty must be in [-2, 2] (0 = off), got {}", presence_penalty);
  }
  if (!in_closed_range(frequency_penalty, -2.0f, 2.0f)) {
    return make_error("frequency_penalty must be in [-2, 2] (0 = off), got {}", frequency_penalty);
  }
  if (penalty_last_n < -1) {
    return make_error("penalty_last_n must be >= -1 (0 = off, -1 = whole history), got {}",
                      penalty_last_n);
  }
  if (max_tokens < 0) {
    return make_error("max_tokens must be >= 0 (0 = no limit), got {}", max_tokens);
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return make_error("stop string {} is empty", i);
  }
  return Status::Ok();
}

}  // namespace tangram
