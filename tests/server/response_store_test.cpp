// The stored responses: per-key least-recently-used limits, isolation between keys, and chains
// that outlive the responses evicted from the list.
#include <gtest/gtest.h>

#include "server/response_store.h"

namespace tangram::server {
namespace {

std::shared_ptr<const ChainLink> link(std::shared_ptr<const ChainLink> before,
                                      const std::string& user, const std::string& reply) {
  auto l = std::make_shared<ChainLink>();
  ChatMessage u, a;
  u.role = "user";
  u.content = user;
  a.role = "assistant";
  a.content = reply;
  l->messages = {u, a};
  l->before = std::move(before);
  return l;
}

StoredResponse response(const std::string& id, std::shared_ptr<const ChainLink> history) {
  return StoredResponse{nlohmann::ordered_json{{"id", id}}, std::move(history)};
}

TEST(ResponseStore, ChainMessagesAreOldestFirst) {
  auto a = link(nullptr, "q1", "a1");
  auto b = link(a, "q2", "a2");
  const std::vector<ChatMessage> m = chain_messages(b);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].content, "q1");
  EXPECT_EQ(m[1].content, "a1");
  EXPECT_EQ(m[2].content, "q2");
  EXPECT_EQ(m[3].content, "a2");
  EXPECT_TRUE(chain_messages(nullptr).empty());
}

TEST(ResponseStore, KeysAreIsolatedAndErasable) {
  ResponseStore s(8);
  s.put("key-a", "resp_1", response("resp_1", link(nullptr, "q", "a")));
  ASSERT_TRUE(s.get("key-a", "resp_1").has_value());
  EXPECT_EQ(s.get("key-a", "resp_1")->body["id"], "resp_1");
  EXPECT_FALSE(s.get("key-b", "resp_1").has_value());
  EXPECT_FALSE(s.erase("key-b", "resp_1"));
  EXPECT_TRUE(s.erase("key-a", "resp_1"));
  EXPECT_FALSE(s.get("key-a", "resp_1").has_value());
  EXPECT_FALSE(s.erase("key-a", "resp_1"));
}

TEST(ResponseStore, EachKeyKeepsItsMostRecentlyUsed) {
  ResponseStore s(2);
  auto first = link(nullptr, "q1", "a1");
  s.put("k", "resp_1", response("resp_1", first));
  s.put("k", "resp_2", response("resp_2", link(first, "q2", "a2")));
  s.put("other", "resp_9", response("resp_9", nullptr));
  ASSERT_TRUE(s.get("k", "resp_1").has_value());  // now the most recently used
  s.put("k", "resp_3", response("resp_3", nullptr));
  EXPECT_TRUE(s.get("k", "resp_1").has_value());
  EXPECT_FALSE(s.get("k", "resp_2").has_value());
  EXPECT_TRUE(s.get("k", "resp_3").has_value());
  EXPECT_TRUE(s.get("other", "resp_9").has_value());  // another key's traffic evicts nothing of its
  EXPECT_EQ(s.size("k"), 2u);
}

TEST(ResponseStore, AChainOutlivesItsEvictedAncestors) {
  ResponseStore s(1);
  auto a = link(nullptr, "q1", "a1");
  s.put("k", "resp_1", response("resp_1", a));
  s.put("k", "resp_2", response("resp_2", link(a, "q2", "a2")));
  EXPECT_FALSE(s.get("k", "resp_1").has_value());
  const std::vector<ChatMessage> m = chain_messages(s.get("k", "resp_2")->history);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].content, "q1");
}

}  // namespace
}  // namespace tangram::server
