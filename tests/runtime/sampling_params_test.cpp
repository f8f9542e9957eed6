#include "runtime/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace tangram {
namespace {

// validate() on defaults with one field changed; returns the error message or "" when ok.
std::string error_for(const std::function<void(SamplingParams&)>& change) {
  SamplingParams p;
  change(p);
  const Status s = p.validate();
  return s.ok() ? std::string() : s.message();
}

TEST(SamplingParams, DefaultsAreValid) { EXPECT_TRUE(SamplingParams{}.validate().ok()); }

TEST(SamplingParams, BoundaryValuesAreValid) {
  EXPECT_EQ(error_for([](SamplingParams& p) { p.temperature = 0.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.temperature = 100.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.top_k = 0; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.top_p = 1.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.min_p = 0.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.min_p = 1.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.presence_penalty = -2.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.frequency_penalty = 2.0f; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.penalty_last_n = -1; }), "");
  EXPECT_EQ(error_for([](SamplingParams& p) { p.max_tokens = 0; }), "");
}

TEST(SamplingParams, OutOfRangeValuesNameTheFieldAndValue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<void(SamplingParams&)> change;
    std::string expected_fragment;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.1f; },
       "temperature must be in [0, 100] (0 = greedy), got -0.1"},
      {[](SamplingParams& p) { p.temperature = 100.5f; }, "temperature must be in [0, 100]"},
      {[&](SamplingParams& p) { p.temperature = nan; },
       "temperature must be in [0, 100] (0 = greedy), got nan"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be >= 0 (0 = off), got -1"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1] (1 = off), got 0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1]"},
      {[&](SamplingParams& p) { p.top_p = nan; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.min_p = -0.01f; }, "min_p must be in [0, 1] (0 = off), got -0.01"},
      {[](SamplingParams& p) { p.min_p = 1.01f; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; },
       "repetition_penalty must be a finite number > 0 (1 = off), got 0"},
      {[](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty must be"},
      {[&](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty must be"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; },
       "presence_penalty must be in [-2, 2] (0 = off), got 2.5"},
      {[](SamplingParams& p) { p.presence_penalty = -2.01f; },
       "presence_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; },
       "frequency_penalty must be in [-2, 2] (0 = off), got -3"},
      {[&](SamplingParams& p) { p.frequency_penalty = nan; },
       "frequency_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; },
       "penalty_last_n must be >= -1 (0 = off, -1 = whole history), got -2"},
      {[](SamplingParams& p) { p.max_tokens = -5; },
       "max_tokens must be >= 0 (0 = no limit), got -5"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "stop string 1 is empty"},
  };
  for (const Case& c : cases) {
    const std::string message = error_for(c.change);
    EXPECT_NE(message.find(c.expected_fragment), std::string::npos)
        << "message: '" << message << "', expected to contain: '" << c.expected_fragment << "'";
  }
}

}  // namespace
}  // namespace tangram
