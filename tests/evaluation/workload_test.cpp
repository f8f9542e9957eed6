// Workload generator and JSONL traces: determinism, distributions against their stated parameters,
// presets, and exact trace round trips with line-numbered errors.
#include "evaluation/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "evaluation/trace.h"
#include "support/test_support.h"

namespace tangram {
namespace {

struct Moments {
  double mean = 0.0;
  double cv = 0.0;  // standard deviation / mean
};

Moments moments(const std::vector<double>& v) {
  double sum = 0.0;
  for (const double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double sq = 0.0;
  for (const double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(v.size() - 1)) / mean};
}

std::vector<Conversation> generate_ok(const WorkloadSpec& spec) {
  Result<std::vector<Conversation>> w = generate_workload(spec);
  EXPECT_TRUE(w.ok()) << w.message();
  return w.ok() ? std::move(w).value() : std::vector<Conversation>{};
}

WorkloadSpec small_spec() {
  WorkloadSpec s;
  s.preset = "t";
  s.sessions = 5;
  s.turns = 3;
  s.first_turn_tokens = 40;
  s.followup_tokens = 10;
  s.output_tokens = 7;
  s.length_jitter = 0.4;
  s.think_time_s = 1.5;
  s.vocab = 1000;
  s.seed = 42;
  return s;
}

TEST(Workload, SameSeedSameWorkloadDifferentSeedDifferent) {
  const WorkloadSpec spec = small_spec();
  const auto a = generate_ok(spec);
  const auto b = generate_ok(spec);
  EXPECT_EQ(a, b);
  WorkloadSpec other = spec;
  other.seed = 43;
  EXPECT_NE(a, generate_ok(other));
}

TEST(Workload, ShapeIdsTokenRangeAndThinkTime) {
  const WorkloadSpec spec = small_spec();
  const auto w = generate_ok(spec);
  ASSERT_EQ(w.size(), 5u);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].id, "t-" + std::to_string(i));
    EXPECT_EQ(w[i].arrival_s, 0.0);  // closed loop
    ASSERT_EQ(w[i].turns.size(), 3u);
    for (size_t t = 0; t < 3; ++t) {
      const Turn& turn = w[i].turns[t];
      EXPECT_FALSE(turn.user_tokens.empty());
      EXPECT_TRUE(turn.user_text.empty());
      EXPECT_GE(turn.output_tokens, 1);
      EXPECT_EQ(turn.think_time_s, t == 0 ? 0.0 : 1.5);
      for (const int32_t id : turn.user_tokens) {
        EXPECT_GE(id, 3);
        EXPECT_LT(id, 1000);
      }
    }
    EXPECT_TRUE(validate_conversation(w[i]).ok());
  }
  EXPECT_TRUE(check_token_range(w, 1000).ok());
  EXPECT_FALSE(check_token_range(w, 500).ok());
}

TEST(Workload, AddingSessionsKeepsEarlierOnes) {
  WorkloadSpec spec = small_spec();
  const auto few = generate_ok(spec);
  spec.sessions = 9;
  const auto more = generate_ok(spec);
  ASSERT_EQ(more.size(), 9u);
  for (size_t i = 0; i < few.size(); ++i) EXPECT_EQ(few[i], more[i]);
}

TEST(Workload, NoJitterGivesExactLengths) {
  WorkloadSpec spec = small_spec();
  spec.length_jitter = 0.0;
  for (const Conversation& c : generate_ok(spec)) {
    EXPECT_EQ(c.turns[0].user_tokens.size(), 40u);
    EXPECT_EQ(c.turns[1].user_tokens.size(), 10u);
    EXPECT_EQ(c.turns[2].user_tokens.size(), 10u);
    for (const Turn& t : c.turns) EXPECT_EQ(t.output_tokens, 7);
  }
}

// 4000 draws per length. Standard error of the mean is CV / sqrt(4000) = 0.8% of the mean at
// CV 0.5, so the 3% tolerance is ~4 sigma; rounding to integers and the clip at 4 x mean move the
// mean by well under 1%. The sample CV's tolerance is 0.05 absolute (10% relative).
TEST(Workload, LengthMeanAndSpreadMatchSpec) {
  WorkloadSpec spec;
  spec.sessions = 4000;
  spec.turns = 2;
  spec.first_turn_tokens = 200;
  spec.followup_tokens = 60;
  spec.output_tokens = 100;
  spec.length_jitter = 0.5;
  spec.vocab = 50;
  spec.seed = 7;
  std::vector<double> first, follow, out, ids;
  for (const Conversation& c : generate_ok(spec)) {
    first.push_back(static_cast<double>(c.turns[0].user_tokens.size()));
    follow.push_back(static_cast<double>(c.turns[1].user_tokens.size()));
    out.push_back(static_cast<double>(c.turns[0].output_tokens));
    for (const int32_t id : c.turns[0].user_tokens) ids.push_back(id);
  }
  const auto check = [](const std::vector<double>& v, double mean, double cv, const char* what) {
    const Moments m = moments(v);
    EXPECT_NEAR(m.mean, mean, 0.03 * mean) << what;
    EXPECT_NEAR(m.cv, cv, 0.05) << what;
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 1.0) << what;
    EXPECT_LE(*std::max_element(v.begin(), v.end()), 4.0 * mean) << what;
  };
  check(first, 200.0, 0.5, "first turn");
  check(follow, 60.0, 0.5, "follow-up");
  check(out, 100.0, 0.5, "output");
  // Token ids uniform on [3, 50): mean 26, over ~800K draws (standard error ~0.015).
  EXPECT_NEAR(moments(ids).mean, 26.0, 0.1);
}

// Open loop: 5000 sessions give 4999 exponential gaps; their mean is within 4% of 1 / rate
// (standard error 1.4%) and their CV near 1, as an exponential's must be.
TEST(Workload, PoissonArrivalsHaveMeanGapOneOverRate) {
  WorkloadSpec spec;
  spec.sessions = 5000;
  spec.turns = 1;
  spec.first_turn_tokens = 1;
  spec.output_tokens = 1;
  spec.arrival = WorkloadSpec::Arrival::OpenLoop;
  spec.request_rate = 4.0;
  spec.seed = 11;
  const auto w = generate_ok(spec);
  ASSERT_EQ(w.size(), 5000u);
  EXPECT_EQ(w[0].arrival_s, 0.0);
  std::vector<double> gaps;
  for (size_t i = 1; i < w.size(); ++i) {
    ASSERT_GE(w[i].arrival_s, w[i - 1].arrival_s);
    gaps.push_back(w[i].arrival_s - w[i - 1].arrival_s);
  }
  const Moments m = moments(gaps);
  EXPECT_NEAR(m.mean, 0.25, 0.04 * 0.25);
  EXPECT_NEAR(m.cv, 1.0, 0.06);
}

// The service preset: conversations arrive open loop and think between turns for times drawn
// from the seed. The figures below were drawn once; SeededRng spells out every step (no standard
// library distribution), so the same seed must give them on every standard library.
TEST(Workload, ServiceArrivalsAndThinkTimesAreSeeded) {
  auto spec = workload_preset("service");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->arrival, WorkloadSpec::Arrival::OpenLoop);
  EXPECT_EQ(spec->think_time_dist, WorkloadSpec::ThinkTime::Exponential);
  EXPECT_EQ(spec->sessions, 20);
  EXPECT_EQ(spec->turns, 3);
  const auto preset = generate_ok(*spec);
  // The figures were drawn with 24 conversations of 4 turns. Arrivals come from one stream in
  // order and each conversation has its own streams, so the preset's 20 x 3 are their prefix.
  spec->sessions = 24;
  spec->turns = 4;
  const auto w = generate_ok(*spec);
  std::vector<Conversation> prefix(w.begin(), w.begin() + 20);
  for (Conversation& c : prefix) c.turns.resize(3);
  EXPECT_EQ(preset, prefix);
  ASSERT_EQ(w.size(), static_cast<size_t>(spec->sessions));
  EXPECT_EQ(w, generate_ok(*spec));
  constexpr double kTol = 1e-9;  // relative: libm's log and exp may differ in the last bit
  EXPECT_NEAR(w[1].arrival_s, 3.3187729329400755, kTol * 3.3187729329400755);
  EXPECT_NEAR(w[23].arrival_s, 37.582182960840534, kTol * 37.582182960840534);
  EXPECT_EQ(w[0].turns[0].think_time_s, 0.0);
  EXPECT_NEAR(w[0].turns[1].think_time_s, 12.86444204799195, kTol * 12.86444204799195);
  EXPECT_NEAR(w[5].turns[3].think_time_s, 23.497459901885836, kTol * 23.497459901885836);
  EXPECT_EQ(w[0].turns[0].user_tokens.size(), 452u);
  WorkloadSpec other = *spec;
  other.seed = 2;
  const auto w2 = generate_ok(other);
  EXPECT_NE(w2[0].turns[1].think_time_s, w[0].turns[1].think_time_s);
  EXPECT_NE(w2[1].arrival_s, w[1].arrival_s);
}

// Drawn think times are exponential with the stated mean, clipped at 4x, and leave every token
// and length as a constant think time would.
TEST(Workload, DrawnThinkTimesHaveTheMeanAndLeaveTokensAlone) {
  WorkloadSpec spec = small_spec();
  spec.sessions = 400;
  spec.turns = 6;
  spec.think_time_s = 10.0;
  WorkloadSpec constant = spec;
  spec.think_time_dist = WorkloadSpec::ThinkTime::Exponential;
  const auto drawn = generate_ok(spec);
  const auto fixed = generate_ok(constant);
  std::vector<double> thinks;
  for (size_t i = 0; i < drawn.size(); ++i)
    for (size_t t = 0; t < drawn[i].turns.size(); ++t) {
      EXPECT_EQ(drawn[i].turns[t].user_tokens, fixed[i].turns[t].user_tokens);
      EXPECT_EQ(drawn[i].turns[t].output_tokens, fixed[i].turns[t].output_tokens);
      if (t == 0) {
        EXPECT_EQ(drawn[i].turns[t].think_time_s, 0.0);
        continue;
      }
      EXPECT_EQ(fixed[i].turns[t].think_time_s, 10.0);
      EXPECT_GE(drawn[i].turns[t].think_time_s, 0.0);
      EXPECT_LE(drawn[i].turns[t].think_time_s, 40.0);
      thinks.push_back(drawn[i].turns[t].think_time_s);
    }
  // 2000 draws: an exponential clipped at 4x the mean has mean (1 - e^-4) x 10 = 9.82 and CV
  // near 0.94; the standard error of the mean is about 2%.
  const Moments m = moments(thinks);
  EXPECT_NEAR(m.mean, 9.817, 0.08 * 9.817);
  EXPECT_NEAR(m.cv, 0.94, 0.08);
}

TEST(Workload, SharedContextIsACommonPrefix) {
  WorkloadSpec spec = small_spec();
  spec.shared_context = true;
  spec.sessions = 8;
  spec.length_jitter = 0.0;
  spec.first_turn_tokens = 300;
  spec.followup_tokens = 20;
  const auto w = generate_ok(spec);
  const std::vector<int32_t>& ref = w[0].turns[0].user_tokens;
  ASSERT_EQ(ref.size(), 320u);  // context + the first question
  size_t common = ref.size();
  for (const Conversation& c : w) {
    const auto& u = c.turns[0].user_tokens;
    ASSERT_EQ(u.size(), 320u);
    common = std::min<size_t>(common,
                              std::mismatch(ref.begin(), ref.end(), u.begin()).first - ref.begin());
  }
  EXPECT_GE(common, 300u);  // the context is shared...
  EXPECT_LT(common, 320u);  // ...the questions are not
  // Without sharing, first turns differ from the start (up to a chance match of a few tokens).
  spec.shared_context = false;
  const auto v = generate_ok(spec);
  const auto& a = v[0].turns[0].user_tokens;
  const auto& b = v[1].turns[0].user_tokens;
  EXPECT_LT(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin(), 5);
}

TEST(Workload, SharedContextWithJitterStillShared) {
  WorkloadSpec spec = small_spec();
  spec.shared_context = true;
  spec.length_jitter = 0.5;
  const auto w = generate_ok(spec);
  // The context length is drawn once; every first turn starts with the same tokens.
  size_t common = w[0].turns[0].user_tokens.size();
  for (const Conversation& c : w) {
    const auto& r = w[0].turns[0].user_tokens;
    const auto& u = c.turns[0].user_tokens;
    const size_t n = std::min(r.size(), u.size());
    common = std::min<size_t>(
        common,
        std::mismatch(r.begin(), r.begin() + static_cast<long>(n), u.begin()).first - r.begin());
  }
  EXPECT_GE(common, 1u);
}

// The quick service is shorter, not lighter: as many conversations arrive during one think time
// as in the full run, so they still outnumber what full KV holds.
TEST(Workload, QuickServiceKeepsAsManyConversationsOverlapping) {
  const auto full = workload_preset("service");
  const auto quick = workload_preset("service-quick");
  ASSERT_TRUE(full.ok() && quick.ok());
  EXPECT_DOUBLE_EQ(quick->request_rate * quick->think_time_s,
                   full->request_rate * full->think_time_s);
  EXPECT_GT(quick->request_rate, full->request_rate);
  EXPECT_LT(quick->think_time_s, full->think_time_s);
  EXPECT_GT(quick->sessions, 3);  // more than bench's KV memory holds under full KV
}

TEST(Workload, PresetsAreValidAndQuickIsSmaller) {
  for (const std::string& name : workload_preset_names()) {
    Result<WorkloadSpec> spec = workload_preset(name);
    ASSERT_TRUE(spec.ok()) << spec.message();
    EXPECT_EQ(spec->preset, name);
    EXPECT_TRUE(validate_workload(*spec).ok()) << name;
    const auto w = generate_ok(*spec);
    ASSERT_EQ(w.size(), static_cast<size_t>(spec->sessions)) << name;

    Result<WorkloadSpec> quick = workload_preset(name + "-quick");
    ASSERT_TRUE(quick.ok()) << quick.message();
    EXPECT_EQ(quick->preset, name + "-quick");
    EXPECT_TRUE(validate_workload(*quick).ok()) << name;
    EXPECT_LE(quick->sessions, spec->sessions);
    EXPECT_LE(quick->turns, spec->turns);
    EXPECT_LE(quick->first_turn_tokens, spec->first_turn_tokens);
    EXPECT_LE(quick->output_tokens, spec->output_tokens);
    EXPECT_LE(quick->concurrency, quick->sessions);
    EXPECT_EQ(quick->shared_context, spec->shared_context);
  }
  const auto sc = workload_preset("scbench");
  ASSERT_TRUE(sc.ok());
  EXPECT_TRUE(sc->shared_context);
  EXPECT_EQ(sc->first_turn_tokens, 2048);
  EXPECT_EQ(sc->turns, 4);
  const auto lc = workload_preset("locomo");
  ASSERT_TRUE(lc.ok());
  EXPECT_EQ(lc->turns, 8);
  EXPECT_EQ(lc->followup_tokens, 256);
  const auto sg = workload_preset("sharegpt");
  ASSERT_TRUE(sg.ok());
  EXPECT_EQ(sg->output_tokens, 128);
  EXPECT_EQ(sg->length_jitter, 0.5);
}

TEST(Workload, UnknownPresetAndInvalidSpecsAreErrors) {
  const auto bad = workload_preset("nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("scbench"), std::string::npos) << bad.message();
  EXPECT_FALSE(workload_preset("-quick").ok());
  EXPECT_FALSE(workload_preset("").ok());

  const auto expect_invalid = [](auto mutate, const char* field) {
    WorkloadSpec s = small_spec();
    mutate(s);
    const Status v = validate_workload(s);
    ASSERT_FALSE(v.ok()) << field;
    EXPECT_NE(v.message().find(field), std::string::npos) << v.message();
    EXPECT_FALSE(generate_workload(s).ok()) << field;
  };
  expect_invalid([](WorkloadSpec& s) { s.sessions = 0; }, "sessions");
  expect_invalid([](WorkloadSpec& s) { s.turns = -1; }, "turns");
  expect_invalid([](WorkloadSpec& s) { s.first_turn_tokens = 0; }, "first_turn_tokens");
  expect_invalid([](WorkloadSpec& s) { s.output_tokens = -5; }, "output_tokens");
  expect_invalid([](WorkloadSpec& s) { s.length_jitter = std::nan(""); }, "length_jitter");
  expect_invalid([](WorkloadSpec& s) { s.think_time_s = -1.0; }, "think_time_s");
  expect_invalid([](WorkloadSpec& s) { s.concurrency = 0; }, "concurrency");
  expect_invalid([](WorkloadSpec& s) { s.vocab = 3; }, "vocab");
  expect_invalid(
      [](WorkloadSpec& s) {
        s.arrival = WorkloadSpec::Arrival::OpenLoop;
        s.request_rate = 0.0;
      },
      "request_rate");
  expect_invalid(
      [](WorkloadSpec& s) {
        s.sessions = 1000000;
        s.first_turn_tokens = 1 << 20;
      },
      "exceed");
}

// ---- traces ----

TEST(Trace, RoundTripIsExact) {
  WorkloadSpec spec = small_spec();
  spec.arrival = WorkloadSpec::Arrival::OpenLoop;
  spec.request_rate = 3.0;
  auto w = generate_ok(spec);
  Conversation text;
  text.id = "text \"quoted\" é 中";
  text.arrival_s = 0.1 + 0.2;  // not exactly representable in short decimal
  text.turns.push_back(Turn{{}, "Hello,\nworld \"x\" \\ é", 12, 0.0});
  text.turns.push_back(Turn{{0, 5, 2147483647}, "", 1, 1e-9});
  w.push_back(text);

  const std::string path = (testing::temp_dir() / "trace.jsonl").string();
  const Status saved = save_trace(w, path);
  ASSERT_TRUE(saved.ok()) << saved.message();
  const auto loaded = load_trace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(*loaded, w);
  // One object per line.
  const std::string body = testing::read_file(path);
  EXPECT_EQ(static_cast<size_t>(std::count(body.begin(), body.end(), '\n')), w.size());
}

TEST(Trace, DefaultsBlankLinesAndCrlf) {
  const std::string path = (testing::temp_dir() / "t.jsonl").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << "\n{\"turns\": [{\"user_text\": \"hi\", \"output_tokens\": 3}]}\r\n   \n"
         "{\"id\": \"b\", \"arrival_s\": 2, \"turns\": [{\"user\": [4], \"output_tokens\": 1, "
         "\"think_time_s\": 0.5}]}\n";
  }
  const auto loaded = load_trace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  ASSERT_EQ(loaded->size(), 2u);
  const Conversation& a = (*loaded)[0];
  EXPECT_EQ(a.id, "line-2");
  EXPECT_EQ(a.arrival_s, 0.0);
  EXPECT_EQ(a.turns[0].user_text, "hi");
  EXPECT_EQ(a.turns[0].output_tokens, 3);
  EXPECT_EQ(a.turns[0].think_time_s, 0.0);
  const Conversation& b = (*loaded)[1];
  EXPECT_EQ(b.id, "b");
  EXPECT_EQ(b.arrival_s, 2.0);
  EXPECT_EQ(b.turns[0].user_tokens, std::vector<int32_t>{4});
  EXPECT_EQ(b.turns[0].think_time_s, 0.5);
}

// Each malformed line is reported as "path:3:" with a phrase naming the problem; lines 1 and 2
// (a good line and a blank one) come first so the number must be counted, not assumed.
TEST(Trace, MalformedLinesNameTheLine) {
  const std::string good = R"({"id": "ok", "turns": [{"user": [5, 6], "output_tokens": 2}]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id": "x", "turns": [)", "not valid JSON"},
      {R"([1, 2, 3])", "one JSON object"},
      {R"({"id": "x"})", "missing \"turns\""},
      {R"({"id": 5, "turns": [{"user": [1], "output_tokens": 1}]})", "\"id\" must be a string"},
      {R"({"turns": {"user": [1]}})", "\"turns\" must be an array"},
      {R"({"turns": []})", "at least one turn"},
      {R"({"turns": [{"user": [1], "output_tokens": 1}, 7]})", "turn 1: must be an object"},
      {R"({"turns": [{"user": "abc", "output_tokens": 1}]})", "array of token ids"},
      {R"({"turns": [{"user": [1, -2], "output_tokens": 1}]})", "\"user\"[1]"},
      {R"({"turns": [{"user": [1, 2.5], "output_tokens": 1}]})", "must be an integer"},
      {R"({"turns": [{"user": [3000000000], "output_tokens": 1}]})", "\"user\"[0]"},
      {R"({"turns": [{"user": [1], "user_text": "a", "output_tokens": 1}]})", "exactly one"},
      {R"({"turns": [{"output_tokens": 1}]})", "exactly one"},
      {R"({"turns": [{"user": [], "output_tokens": 1}]})", "exactly one"},
      {R"({"turns": [{"user": [1]}]})", "missing \"output_tokens\""},
      {R"({"turns": [{"user": [1], "output_tokens": 0}]})", "output_tokens"},
      {R"({"turns": [{"user": [1], "output_tokens": 1, "think_time_s": -1}]})", "think_time_s"},
      {R"({"arrival_s": "soon", "turns": [{"user": [1], "output_tokens": 1}]})", "arrival_s"},
      // A number past double's range is a parse error, not infinity.
      {R"({"arrival_s": 1e999, "turns": [{"user": [1], "output_tokens": 1}]})", "not valid JSON"},
      {R"({"turns": [{"user": [1], "output_token": 1}]})", "unknown key \"output_token\""},
      {R"({"id": "x", "turns": [], "extra": 1})", "unknown key \"extra\""},
      {R"({"id": "ok", "turns": [{"user": [1], "output_tokens": 1}]})", "already used on line 1"},
      {"{\"turns\": [{\"user_text\": \"\xff\xfe\", \"output_tokens\": 1}]}", "not valid JSON"},
  };
  const auto dir = testing::temp_dir();
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = (dir / ("bad" + std::to_string(i) + ".jsonl")).string();
    {
      std::ofstream f(path, std::ios::binary);
      f << good << "\n\n" << cases[i].first << "\n" << good << "\n";
    }
    const auto r = load_trace(path);
    ASSERT_FALSE(r.ok()) << "case " << i << ": " << cases[i].first;
    EXPECT_NE(r.message().find(path + ":3:"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(cases[i].second), std::string::npos)
        << "case " << i << ": " << r.message();
  }
}

TEST(Trace, MissingFileAndUnsavableConversationsAreErrors) {
  const auto dir = testing::temp_dir();
  EXPECT_FALSE(load_trace((dir / "absent.jsonl").string()).ok());

  Conversation c;
  c.id = "a";
  c.turns.push_back(Turn{{1}, "", 1, 0.0});
  const std::string path = (dir / "out.jsonl").string();
  EXPECT_FALSE(save_trace({c, c}, path).ok());  // duplicate ids
  Conversation no_turns = c;
  no_turns.turns.clear();
  EXPECT_FALSE(save_trace({no_turns}, path).ok());
  Conversation nan_time = c;
  nan_time.arrival_s = std::nan("");
  EXPECT_FALSE(save_trace({nan_time}, path).ok());
  Conversation bad_utf8 = c;
  bad_utf8.turns[0] = Turn{{}, "\xff", 1, 0.0};
  EXPECT_FALSE(save_trace({bad_utf8}, path).ok());
  EXPECT_FALSE(save_trace({c}, (dir / "no" / "such" / "dir.jsonl").string()).ok());
  EXPECT_TRUE(save_trace({}, path).ok());  // an empty trace is a valid (empty) file
  const auto empty = load_trace(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace tangram
