// Sessions whose KV leaves the pool: moved to host memory or disk under memory pressure and
// restored on their next turn (not recomputed), surviving a restart through the disk tier, and a
// damaged file or one of an older format recomputed, never served. Each second turn is checked
// against a scheduler with memory to spare and no tiers, on the same requests one at a time (same
// batch shapes, so the same floating-point sums: tokens must be equal).
#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "scheduler_test_util.h"
#include "support/redis_server.h"

namespace tangram::testing {
namespace {

constexpr int kSessions = 6;
constexpr int kGen = 8;

SchedulerOptions base_options() {
  SchedulerOptions o;
  o.kv_memory = 16u << 20;
  o.kv_type = KvType::F16;
  o.prefault = false;
  o.page_tokens = 8;
  return o;
}

// Runs one request alone; returns its result.
RequestResult run_one(Scheduler& s, std::vector<int32_t> prompt, const std::string& session) {
  Request r = greedy_request(std::move(prompt), kGen);
  r.session_id = session;
  RequestResult out;
  r.on_finish = [&](const RequestResult& res) { out = res; };
  auto id = s.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.message();
  s.run_until_idle();
  return out;
}

struct Conversations {
  std::vector<std::vector<int32_t>> first;    // [kSessions] turn-1 prompts
  std::vector<std::vector<int32_t>> second;   // [kSessions] turn-2 prompts (turn 1 + reply + more)
  std::vector<std::vector<int32_t>> replies;  // [kSessions] turn-2 outputs
  std::vector<RequestUsage> usage;            // [kSessions] turn-2 usage
};

// Turn 1 of every session, then turn 2 of every session.
Conversations play(Scheduler& s, int64_t vocab, bool turn2 = true, Conversations* given = nullptr) {
  Conversations c;
  for (int i = 0; i < kSessions; ++i) {
    c.first.push_back(prompt_of(40 + 4 * i, static_cast<uint32_t>(300 + i), vocab));
    if (given == nullptr) {
      const RequestResult r = run_one(s, c.first.back(), "chat-" + std::to_string(i));
      std::vector<int32_t> next = c.first.back();
      next.insert(next.end(), r.tokens.begin(), r.tokens.end());
      const auto more = prompt_of(12, static_cast<uint32_t>(400 + i), vocab);
      next.insert(next.end(), more.begin(), more.end());
      c.second.push_back(next);
    }
  }
  if (given != nullptr) c.second = given->second;
  if (turn2)
    for (int i = 0; i < kSessions; ++i) {
      const RequestResult r =
          run_one(s, c.second[static_cast<size_t>(i)], "chat-" + std::to_string(i));
      c.replies.push_back(r.tokens);
      c.usage.push_back(r.usage);
    }
  return c;
}

size_t pool_bytes_for(const ModelConfig& c, int sessions) {
  // Pages of 8 positions for every KV head of every layer; a session reaches about 70 positions.
  const size_t page_bytes = 8 *
                            (static_cast<size_t>(c.head_dim) + static_cast<size_t>(c.head_dim_v)) *
                            2 * static_cast<size_t>(c.n_kv_head);
  return page_bytes * static_cast<size_t>(c.n_layers) * 10 * static_cast<size_t>(sessions);
}

// Every test: the model, two threads, and the reference conversations played on a scheduler with
// memory to spare and no tiers.
class TieredScheduler : public ::testing::Test {
 protected:
  void SetUp() override {
    tm = synth_model("tiny-qwen3");
    ASSERT_TRUE(tm.model && tm.tokenizer);
    auto roomy = Scheduler::create(*tm.model, *tm.tokenizer, pool, base_options());
    ASSERT_TRUE(roomy.ok()) << roomy.message();
    ref = play(**roomy, tm.model->config().vocab);
  }
  TestModel tm;
  ThreadPool pool{2};
  Conversations ref;
};

TEST_F(TieredScheduler, HostSpillRestoresInsteadOfRecomputing) {
  const ModelConfig& c = tm.model->config();

  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  o.kv_memory = pool_bytes_for(c, 2);  // about two sessions resident
  k.kv_host_memory = 64u << 20;
  auto tight = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(tight.ok()) << tight.message();
  const Conversations got = play(**tight, c.vocab);
  const SchedulerStats st = (*tight)->stats();
  EXPECT_GE(st.tiers.offloads, kSessions - 2);
  EXPECT_GE(st.tiers.restores, kSessions - 2);
  EXPECT_EQ(st.tiers.restore_failures, 0);
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got.second[static_cast<size_t>(i)],
              ref.second[static_cast<size_t>(i)]);  // same turn-1 replies
    EXPECT_EQ(got.replies[static_cast<size_t>(i)], ref.replies[static_cast<size_t>(i)]);
  }
  // Each second turn says where its history came from: a restored one has all its cached tokens
  // from the tier, a resident one none; as many restored as the tier counted.
  int64_t restored_turns = 0;
  for (const RequestUsage& u : got.usage) {
    EXPECT_GT(u.cached_tokens, 0);
    if (u.restored_tokens > 0) {
      ++restored_turns;
      EXPECT_EQ(u.restored_tokens, u.cached_tokens);
    }
  }
  EXPECT_EQ(restored_turns, st.tiers.restores);
  for (const RequestUsage& u : ref.usage) EXPECT_EQ(u.restored_tokens, 0);  // all resident, no tier
  // Without tiers the same pool recomputes instead: the restored turns above reused their KV.
  auto plain = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(plain.ok());
  const Conversations p = play(**plain, c.vocab);
  EXPECT_EQ(p.replies, ref.replies);
  EXPECT_GT((*plain)->stats().prefill_tokens, st.prefill_tokens);
  for (const RequestUsage& u : p.usage) EXPECT_EQ(u.restored_tokens, 0);
}

TEST_F(TieredScheduler, DiskTierSurvivesARestartAndRefusesDamageAndOldFormats) {
  const ModelConfig& c = tm.model->config();

  const auto dir = temp_dir() / "sessions";
  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  k.kv_disk_dir = dir.string();
  {
    auto before = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
    ASSERT_TRUE(before.ok()) << before.message();
    (void)play(**before, c.vocab, /*turn2=*/false);  // turn 1 only, then the "crash"
  }
  // Damage one session file: flip a byte in the middle.
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".kvs") files.push_back(f.path());
  ASSERT_EQ(files.size(), static_cast<size_t>(kSessions));
  std::sort(files.begin(), files.end());
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(files[0]);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write(&b, 1);
  }
  {
    // Another as a blob of the previous format version would be: version 1 in a header whose
    // checksum holds (the whole file read, the version rewritten, the header re-summed).
    std::string bytes(std::filesystem::file_size(files[1]), '\0');
    {
      std::ifstream in(files[1], std::ios::binary);
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    const size_t at = bytes.find("TGKVSESS");
    ASSERT_NE(at, std::string::npos);
    const uint32_t version = 1;
    std::memcpy(bytes.data() + at + 8, &version, sizeof(version));
    const uint64_t sum = XXH3_64bits(bytes.data() + at, 80);
    std::memcpy(bytes.data() + at + 80, &sum, sizeof(sum));
    std::ofstream out(files[1], std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<std::string> warnings;
  k.warn = [&](const std::string& m) { warnings.push_back(m); };
  auto after = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(after.ok()) << after.message();
  int reused = 0;
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    const RequestResult r =
        run_one(**after, ref.second[static_cast<size_t>(i)], "chat-" + std::to_string(i));
    EXPECT_EQ(r.tokens, ref.replies[static_cast<size_t>(i)]);
    if (r.usage.cached_tokens > 0) {
      ++reused;
      EXPECT_EQ(r.usage.cached_tokens,
                static_cast<int64_t>(ref.first[static_cast<size_t>(i)].size()) + kGen - 1);
    }
  }
  const SchedulerStats st = (*after)->stats();
  // Every session but the damaged one and the old-format one came back from disk; those two were
  // recomputed, with the same replies.
  EXPECT_EQ(reused, kSessions - 2);
  EXPECT_EQ(st.tiers.restores, kSessions - 2);
  EXPECT_EQ(st.tiers.restore_failures, 2);
  const bool version_named = std::any_of(
      warnings.begin(), warnings.end(),
      [](const std::string& w) { return w.find("session format version 1") != std::string::npos; });
  EXPECT_TRUE(version_named) << "no warning names the old format version";
}

// Two replicas (schedulers over the same model) sharing one Redis: turn 1 of every session on
// the first, turn 2 on the second, which restores each from Redis with the first's cache.
TEST_F(TieredScheduler, RedisTierHandsSessionsToAnotherReplica) {
  const ModelConfig& c = tm.model->config();

  RedisServer redis(temp_dir());
  ASSERT_TRUE(redis.start());
  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  k.kv_redis = redis.address();
  std::vector<std::string> warnings;
  k.warn = [&](const std::string& m) { warnings.push_back(m); };
  auto replica_a = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(replica_a.ok()) << replica_a.message();
  (void)play(**replica_a, c.vocab, /*turn2=*/false);
  (*replica_a)->sessions().flush_writes();
  EXPECT_EQ((*replica_a)->stats().tiers.redis.puts, kSessions);  // written through after each turn
  replica_a->reset();                                            // the replica dies

  auto replica_b = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(replica_b.ok());
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    const std::string id = "chat-" + std::to_string(i);
    EXPECT_EQ((*replica_b)->session_tier(id), "redis");
    EXPECT_GT((*replica_b)->session_location(id).bytes, 0);
    const RequestResult r = run_one(**replica_b, ref.second[static_cast<size_t>(i)], id);
    EXPECT_EQ(r.tokens, ref.replies[static_cast<size_t>(i)]);
    EXPECT_EQ(r.usage.cached_tokens,
              static_cast<int64_t>(ref.first[static_cast<size_t>(i)].size()) + kGen - 1);
  }
  const SchedulerStats st = (*replica_b)->stats();
  EXPECT_EQ(st.tiers.restores_redis, kSessions);
  EXPECT_EQ(st.tiers.restore_failures, 0);
  EXPECT_TRUE(warnings.empty());

  // A session deleted on one replica is gone from Redis for all.
  EXPECT_TRUE((*replica_b)->drop_session("chat-0"));
  auto replica_c = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(replica_c.ok());
  EXPECT_EQ((*replica_c)->session_tier("chat-0"), "none");
  EXPECT_EQ((*replica_c)->session_tier("chat-1"), "redis");
}

// Redis going away mid-conversation: turns are still served (recomputed, or from local tiers),
// with one warning; when it is back, sessions are shared again.
TEST_F(TieredScheduler, LostRedisDegradesToLocalTiers) {
  const ModelConfig& c = tm.model->config();

  RedisServer redis(temp_dir());
  ASSERT_TRUE(redis.start());
  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  o.kv_memory = pool_bytes_for(c, 2);  // about two sessions resident
  k.kv_host_memory = 64u << 20;
  k.kv_redis = redis.address();
  std::vector<std::string> warnings;
  k.warn = [&](const std::string& m) { warnings.push_back(m); };
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(s.ok());
  (void)play(**s, c.vocab, /*turn2=*/false);
  redis.stop();
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    const RequestResult r =
        run_one(**s, ref.second[static_cast<size_t>(i)], "chat-" + std::to_string(i));
    EXPECT_EQ(r.tokens, ref.replies[static_cast<size_t>(i)]);
    EXPECT_GT(r.usage.cached_tokens, 0);  // resident or from the host tier
  }
  const SchedulerStats st = (*s)->stats();
  EXPECT_FALSE(st.tiers.redis.connected);
  EXPECT_GT(st.tiers.redis.errors, 0);
  ASSERT_GE(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("local tiers"), std::string::npos) << warnings[0];
}

// --kv-idle-offload: a session idle past the limit leaves the pool for the host tier (its pages
// free) and its next turn restores it.
TEST_F(TieredScheduler, IdleSessionsMoveDownAfterTheirTime) {
  const ModelConfig& c = tm.model->config();
  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  k.kv_idle_offload_seconds = 600;
  EXPECT_FALSE(Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k).ok())
      << "idle offload without a tier";
  k.kv_host_memory = 64u << 20;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(s.ok()) << s.message();

  (void)play(**s, c.vocab, /*turn2=*/false);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ((*s)->sessions().offload_idle(now), 0) << "nobody idle long enough yet";
  const int64_t used = (*s)->stats().pool.used_pages;
  EXPECT_GT(used, 0);
  EXPECT_EQ((*s)->sessions().offload_idle(now + std::chrono::seconds(601)), kSessions);
  EXPECT_EQ((*s)->stats().pool.used_pages, 0);
  EXPECT_EQ((*s)->session_tier("chat-0"), "host");
  EXPECT_GT((*s)->session_location("chat-0").bytes, 0);
  const RequestResult r = run_one(**s, ref.second[0], "chat-0");
  EXPECT_EQ(r.tokens, ref.replies[0]);
  EXPECT_EQ(r.usage.cached_tokens, static_cast<int64_t>(ref.first[0].size()) + kGen - 1);
  EXPECT_EQ((*s)->stats().tiers.restores_host, 1);
}

// Read-ahead: turns queued behind others have their sessions read from disk by the I/O thread
// while they wait, and the restore at admission takes the blob already in memory.
TEST_F(TieredScheduler, QueuedTurnsReadTheirSessionsAhead) {
  const ModelConfig& c = tm.model->config();

  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  k.kv_disk_dir = (temp_dir() / "sessions").string();
  o.max_running = 1;  // one turn at a time: the others wait in the queue
  {
    auto before = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
    ASSERT_TRUE(before.ok()) << before.message();
    (void)play(**before, c.vocab, /*turn2=*/false);
  }
  auto after = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(after.ok()) << after.message();
  std::vector<RequestResult> got(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    Request r = greedy_request(ref.second[static_cast<size_t>(i)], kGen);
    r.session_id = "chat-" + std::to_string(i);
    r.on_finish = [&got, i](const RequestResult& res) { got[static_cast<size_t>(i)] = res; };
    ASSERT_TRUE((*after)->submit(std::move(r)).ok());
  }
  (*after)->run_until_idle();
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[static_cast<size_t>(i)].tokens, ref.replies[static_cast<size_t>(i)]);
    EXPECT_EQ(got[static_cast<size_t>(i)].usage.cached_tokens,
              static_cast<int64_t>(ref.first[static_cast<size_t>(i)].size()) + kGen - 1);
  }
  const SchedulerStats st = (*after)->stats();
  EXPECT_EQ(st.tiers.prefetches, kSessions);
  EXPECT_EQ(st.tiers.restores_disk, kSessions);
  // The turns that waited behind a whole other turn found their blob read already.
  EXPECT_GE(st.tiers.prefetch_hits, 1);
  EXPECT_LE(st.tiers.prefetch_hits, kSessions);
}

// Dropping a session whose turn is running (a DELETE) is final: the turn is cancelled, its pages
// go back to the pool instead of to the session, nothing of it is written to disk afterwards,
// and a restart does not bring it back. A turn of the same id submitted after the drop (a new
// conversation) is left alone.
TEST_F(TieredScheduler, DroppingARunningSessionIsFinal) {
  const auto dir = temp_dir() / "dropped";
  SchedulerOptions o = base_options();
  SessionKeeperOptions k;
  k.kv_disk_dir = dir.string();
  auto kvs_files = [&] {
    int n = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir))
      n += f.path().extension() == ".kvs";
    return n;
  };
  {
    auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
    ASSERT_TRUE(s.ok()) << s.message();
    Scheduler& sch = **s;
    (void)run_one(sch, ref.first[0], "doomed");  // a first turn, written through
    sch.sessions().flush_writes();
    ASSERT_EQ(kvs_files(), 1);
    std::vector<RequestResult> got(2);
    Request r = greedy_request(ref.second[0], 64);
    r.session_id = "doomed";
    r.on_finish = [&](const RequestResult& res) { got[0] = res; };
    auto first = sch.submit(std::move(r));
    ASSERT_TRUE(first.ok());
    while (sch.session_tier("doomed") != "running" || sch.stats().decode_tokens == 0)
      ASSERT_GT(sch.step(), 0);
    Request later = greedy_request(ref.first[1], 4);
    later.session_id = "doomed";
    later.on_finish = [&](const RequestResult& res) { got[1] = res; };
    auto second = sch.submit(std::move(later));
    ASSERT_TRUE(second.ok());

    EXPECT_TRUE(sch.drop_session("doomed", /*cancel_before=*/*second));
    EXPECT_EQ(got[0].finish, FinishReason::Cancelled);
    sch.sessions().flush_writes();
    EXPECT_EQ(kvs_files(), 0);
    EXPECT_EQ(sch.stats().pool.used_pages, 0);  // nothing went back to the session
    // The later turn runs as a new conversation: nothing of the old one is reused.
    sch.run_until_idle();
    EXPECT_EQ(got[1].finish, FinishReason::Length);
    EXPECT_EQ(got[1].usage.cached_tokens, 0);
    EXPECT_TRUE(sch.drop_session("doomed"));
    EXPECT_FALSE(sch.drop_session("doomed"));
    sch.sessions().flush_writes();
    EXPECT_EQ(kvs_files(), 0);
    EXPECT_EQ(sch.stats().pool.used_pages, 0);
    EXPECT_EQ(sch.stats().sessions, 0u);
  }
  auto restarted = Scheduler::create(*tm.model, *tm.tokenizer, pool, o, k);
  ASSERT_TRUE(restarted.ok()) << restarted.message();
  EXPECT_TRUE((*restarted)->sessions().named_sessions().empty());
}

}  // namespace
}  // namespace tangram::testing
