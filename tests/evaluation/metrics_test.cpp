// Percentiles, run summaries and time series against hand-computed values. Percentiles use linear
// interpolation between closest ranks: rank = p / 100 x (n - 1).
#include "evaluation/metrics.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tangram {
namespace {

constexpr double kEps = 1e-12;

std::vector<double> one_to_ten() {
  std::vector<double> v(10);
  std::iota(v.begin(), v.end(), 1.0);
  return v;
}

TEST(Percentile, LinearInterpolationOnOneToTen) {
  const auto v = one_to_ten();
  EXPECT_NEAR(percentile(v, 0.0), 1.0, kEps);
  EXPECT_NEAR(percentile(v, 25.0), 3.25, kEps);  // rank 2.25
  EXPECT_NEAR(percentile(v, 50.0), 5.5, kEps);   // rank 4.5
  EXPECT_NEAR(percentile(v, 90.0), 9.1, kEps);   // rank 8.1
  EXPECT_NEAR(percentile(v, 99.0), 9.91, kEps);  // rank 8.91
  EXPECT_NEAR(percentile(v, 100.0), 10.0, kEps);
}

TEST(Percentile, UnsortedInputClampingAndEdgeCases) {
  EXPECT_NEAR(percentile({7.0, 1.0, 3.0}, 50.0), 3.0, kEps);
  EXPECT_NEAR(percentile({7.0, 1.0, 3.0}, 75.0), 5.0, kEps);  // rank 1.5: between 3 and 7
  EXPECT_NEAR(percentile({4.0}, 99.0), 4.0, kEps);
  EXPECT_NEAR(percentile({1.0, 2.0}, -10.0), 1.0, kEps);
  EXPECT_NEAR(percentile({1.0, 2.0}, 250.0), 2.0, kEps);
  EXPECT_TRUE(std::isnan(percentile({}, 50.0)));
  EXPECT_TRUE(std::isnan(percentile({1.0}, std::nan(""))));
  // NaN values are ignored, not sorted into the middle.
  EXPECT_NEAR(percentile({std::nan(""), 2.0, 4.0, std::nan("")}, 50.0), 3.0, kEps);
  EXPECT_TRUE(std::isnan(percentile({std::nan("")}, 50.0)));
}

TEST(Summary, OneToTenAndEmpty) {
  const LatencySummary s = summarize(one_to_ten());
  EXPECT_EQ(s.n, 10u);
  EXPECT_NEAR(s.mean, 5.5, kEps);
  EXPECT_NEAR(s.p50, 5.5, kEps);
  EXPECT_NEAR(s.p90, 9.1, kEps);
  EXPECT_NEAR(s.p99, 9.91, kEps);
  EXPECT_NEAR(s.max, 10.0, kEps);
  const LatencySummary e = summarize({});
  EXPECT_EQ(e.n, 0u);
  EXPECT_TRUE(std::isnan(e.mean) && std::isnan(e.p50) && std::isnan(e.p99) && std::isnan(e.max));
}

// Three completed requests and one failed one over a 10 s run:
//   a: submit 0, first 0.5, finish 2.5, 5 tokens  -> TTFT 0.5, TPOT 2.0 / 4 = 0.5, e2e 2.5
//   b: submit 1, first 1.2, finish 1.2, 1 token   -> TTFT 0.2, no TPOT,            e2e 0.2
//   c: submit 2, first 3.0, finish 5.0, 3 tokens  -> TTFT 1.0, TPOT 2.0 / 2 = 1.0, e2e 3.0
std::vector<RequestRecord> hand_records() {
  std::vector<RequestRecord> r(4);
  r[0] = {"s0", 0, 0.0, 0.5, 2.5, 0.1, 100, 0, 5, 0, 0, false};
  r[1] = {"s0", 1, 1.0, 1.2, 1.2, 0.0, 50, 40, 1, 0, 0, false};
  r[2] = {"s1", 0, 2.0, 3.0, 5.0, 0.5, 80, 20, 3, 30, 1, false};
  r[3] = {"s2", 0, 2.0, std::nan(""), 9.0, 0.0, 999, 0, 999, 999, 9, true};
  return r;
}

TEST(RunMetrics, HandComputedRecords) {
  const auto records = hand_records();
  const auto m = compute_run_metrics(records, 10.0);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->requests, 4u);
  EXPECT_EQ(m->completed, 3u);
  EXPECT_EQ(m->errors, 1u);
  EXPECT_NEAR(m->requests_per_s, 0.3, kEps);
  EXPECT_NEAR(m->output_tokens_per_s, 0.9, kEps);  // 9 tokens / 10 s

  EXPECT_EQ(m->ttft_s.n, 3u);
  EXPECT_NEAR(m->ttft_s.mean, 1.7 / 3.0, kEps);
  EXPECT_NEAR(m->ttft_s.p50, 0.5, kEps);
  EXPECT_NEAR(m->ttft_s.p90, 0.9, kEps);  // rank 1.8 of {0.2, 0.5, 1.0}
  EXPECT_NEAR(m->ttft_s.max, 1.0, kEps);

  EXPECT_EQ(m->tpot_s.n, 2u);
  EXPECT_NEAR(m->tpot_s.mean, 0.75, kEps);
  EXPECT_NEAR(m->tpot_s.p50, 0.75, kEps);
  EXPECT_NEAR(m->tpot_s.max, 1.0, kEps);

  EXPECT_EQ(m->e2e_s.n, 3u);
  EXPECT_NEAR(m->e2e_s.mean, 1.9, kEps);
  EXPECT_NEAR(m->e2e_s.p50, 2.5, kEps);
  EXPECT_NEAR(m->e2e_s.p99, 2.99, kEps);  // rank 1.98: 2.5 + 0.98 x 0.5
  EXPECT_NEAR(m->queue_s.mean, 0.2, kEps);

  EXPECT_EQ(m->prompt_tokens, 230);
  EXPECT_EQ(m->cached_tokens, 60);
  EXPECT_EQ(m->output_tokens, 9);
  EXPECT_EQ(m->recomputed_tokens, 30);
  EXPECT_EQ(m->preemptions, 1);
  EXPECT_NEAR(m->cached_fraction, 60.0 / 230.0, kEps);
}

TEST(RunMetrics, EmptyRunAndInvalidInputs) {
  const auto empty = compute_run_metrics({}, 1.0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->completed, 0u);
  EXPECT_EQ(empty->requests_per_s, 0.0);
  EXPECT_TRUE(std::isnan(empty->ttft_s.p50));
  EXPECT_TRUE(std::isnan(empty->cached_fraction));

  const auto records = hand_records();
  EXPECT_FALSE(compute_run_metrics(records, 0.0).ok());
  EXPECT_FALSE(compute_run_metrics(records, std::nan("")).ok());

  const auto expect_bad = [&](auto mutate, const char* phrase) {
    auto r = hand_records();
    mutate(r[2]);
    const auto m = compute_run_metrics(r, 10.0);
    ASSERT_FALSE(m.ok()) << phrase;
    EXPECT_NE(m.message().find("record 2 (session 's1', turn 0)"), std::string::npos)
        << m.message();
    EXPECT_NE(m.message().find(phrase), std::string::npos) << m.message();
  };
  expect_bad([](RequestRecord& r) { r.finish_s = 2.5; }, "out of order");
  expect_bad([](RequestRecord& r) { r.first_token_s = 1.0; }, "out of order");
  expect_bad([](RequestRecord& r) { r.first_token_s = std::nan(""); }, "finite");
  expect_bad([](RequestRecord& r) { r.cached_tokens = 81; }, "exceed");
  expect_bad([](RequestRecord& r) { r.output_tokens = -1; }, "negative");
  expect_bad([](RequestRecord& r) { r.queue_s = -0.1; }, "queue");
}

TEST(RunMetrics, ZeroOutputRequestHasNoTtft) {
  std::vector<RequestRecord> r(1);
  r[0] = {"s", 0, 1.0, std::nan(""), 1.5, 0.0, 10, 0, 0, 0, 0, false};
  const auto m = compute_run_metrics(r, 2.0);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->ttft_s.n, 0u);
  EXPECT_EQ(m->e2e_s.n, 1u);
  EXPECT_NEAR(m->e2e_s.mean, 0.5, kEps);
}

// Follow-up turns by where their history was found: restored (any cached token from a tier)
// before resident (cached), recomputed otherwise; first turns and failed requests are not counted.
TEST(RunMetrics, FollowupTurnsResidentRestoredRecomputed) {
  std::vector<RequestRecord> r(7);
  for (RequestRecord& x : r) {
    x.submit_s = 0.0;
    x.first_token_s = 0.5;
    x.finish_s = 1.0;
    x.prompt_tokens = 100;
    x.output_tokens = 4;
  }
  r[0].turn = 0;                                                      // first turn: not a follow-up
  r[1].turn = 1, r[1].cached_tokens = 90;                             // resident
  r[2].turn = 2, r[2].cached_tokens = 95;                             // resident
  r[3].turn = 1, r[3].cached_tokens = 90, r[3].restored_tokens = 90;  // restored from a tier
  r[4].turn = 3;                                                      // recomputed: nothing cached
  r[5].turn = 2, r[5].recomputed_tokens = 50,
  r[5].preemptions = 1;                                       // recomputed, then preempted too
  r[6].turn = 1, r[6].cached_tokens = 90, r[6].error = true;  // failed: left out
  const FollowupSources f = classify_followups(r);
  EXPECT_EQ(f.resident, 2);
  EXPECT_EQ(f.restored, 1);
  EXPECT_EQ(f.recomputed, 2);
  EXPECT_EQ(f.total(), 5);
  EXPECT_NEAR(f.share(f.resident), 0.4, kEps);
  EXPECT_NEAR(f.share(f.restored), 0.2, kEps);
  EXPECT_TRUE(std::isnan(FollowupSources{}.share(0)));

  const auto m = compute_run_metrics(r, 2.0);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->followups.resident, 2);
  EXPECT_EQ(m->followups.restored, 1);
  EXPECT_EQ(m->followups.recomputed, 2);
  EXPECT_EQ(m->restored_tokens, 90);
  nlohmann::json j = *m;
  EXPECT_EQ(j["followups"]["restored"], 1);
  EXPECT_NEAR(j["followups"]["recomputed_share"].get<double>(), 0.4, kEps);

  r[3].restored_tokens = 91;  // more restored than cached: not a record the engine makes
  const auto bad = compute_run_metrics(r, 2.0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("restored_tokens"), std::string::npos) << bad.message();
}

TEST(TimeSeries, DownsampleMeanAndMax) {
  TimeSeries s;
  for (int i = 0; i < 10; ++i) s.add(i, i % 3 == 0 ? 100.0 : i);  // peaks at 0, 3, 6, 9
  // 10 samples into 4 buckets: [0,2) [2,5) [5,7) [7,10).
  const TimeSeries mean = downsample(s, 4);
  ASSERT_EQ(mean.t.size(), 4u);
  ASSERT_EQ(mean.value.size(), 4u);
  EXPECT_NEAR(mean.t[0], 0.5, kEps);
  EXPECT_NEAR(mean.value[0], 50.5, kEps);  // (100 + 1) / 2
  EXPECT_NEAR(mean.t[1], 3.0, kEps);
  EXPECT_NEAR(mean.value[1], (2.0 + 100.0 + 4.0) / 3.0, kEps);
  EXPECT_NEAR(mean.t[3], 8.0, kEps);
  EXPECT_NEAR(mean.value[3], (7.0 + 8.0 + 100.0) / 3.0, kEps);
  const TimeSeries peak = downsample(s, 4, Downsample::Max);
  ASSERT_EQ(peak.value.size(), 4u);
  EXPECT_NEAR(peak.value[2], 100.0, kEps);  // [5, 7): 5 and the peak at 6
  for (const double v : peak.value) EXPECT_NEAR(v, 100.0, kEps);

  const TimeSeries same = downsample(s, 10);
  EXPECT_EQ(same.t, s.t);
  EXPECT_EQ(same.value, s.value);
  EXPECT_TRUE(downsample(s, 0).t.empty());
  EXPECT_TRUE(downsample(TimeSeries{}, 5).t.empty());
  // Mismatched vectors (public members) are cut to the shorter length, never read past.
  TimeSeries odd = s;
  odd.value.resize(3);
  EXPECT_EQ(downsample(odd, 100).t.size(), 3u);
  EXPECT_EQ(downsample(odd, 2).value.size(), 2u);
}

TEST(TimeSeries, DownsampleLongSeriesKeepsCountAndOrder) {
  TimeSeries s;
  for (int i = 0; i < 100000; ++i) s.add(0.001 * i, std::sin(0.001 * i));
  const TimeSeries d = downsample(s, 300);
  ASSERT_EQ(d.t.size(), 300u);
  for (size_t i = 1; i < d.t.size(); ++i) EXPECT_LT(d.t[i - 1], d.t[i]);
  EXPECT_NEAR(d.t.front(), 0.001 * (333 - 1) / 2.0, 1e-9);  // bucket 0: samples 0..332
}

TEST(MetricsJson, NaNBecomesNullAndFieldsPresent) {
  const auto m = compute_run_metrics(hand_records(), 10.0);
  ASSERT_TRUE(m.ok());
  const nlohmann::json j = *m;
  EXPECT_EQ(j.at("completed").get<size_t>(), 3u);
  EXPECT_NEAR(j.at("ttft_s").at("p50").get<double>(), 0.5, kEps);
  const nlohmann::json e = summarize({});
  EXPECT_EQ(e.dump(), R"({"max":null,"mean":null,"n":0,"p50":null,"p90":null,"p99":null})");
  TimeSeries ts;
  ts.add(1.0, 2.0);
  const nlohmann::json t = ts;
  EXPECT_EQ(t.dump(), R"({"t":[1.0],"value":[2.0]})");
}

}  // namespace
}  // namespace tangram
