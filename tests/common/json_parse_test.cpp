// Bounded JSON parsing: depth and value limits hold while parsing (deep input is refused, not
// recursed into), the heap a parse may take is a bounded multiple of its input, and no source
// file parses JSON any other way.
#include "common/json_parse.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <regex>
#include <sstream>
#include <string>

// Counts live heap bytes while `tracking` is on (the peak a parse reaches), for this binary only.
namespace {
std::atomic<bool> tracking{false};
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};
}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  if (tracking.load(std::memory_order_relaxed)) {
    const int64_t now = live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                        static_cast<int64_t>(malloc_usable_size(p));
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr && tracking.load(std::memory_order_relaxed))
    live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace tangram {
namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST(JsonParse, NestingIsBoundedWhileParsing) {
  JsonLimits limits;
  EXPECT_TRUE(parse_json(nested(limits.max_depth - 1)).ok());  // the scalar inside counts no level
  EXPECT_TRUE(parse_json(nested(limits.max_depth)).ok());
  auto too_deep = parse_json(nested(limits.max_depth + 1));
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.message().find("nests deeper than 64"), std::string::npos)
      << too_deep.message();
  // What crashed the server: 20,000 and 1,000,000 levels, arrays and objects, unterminated too.
  EXPECT_FALSE(parse_json(nested(20000)).ok());
  EXPECT_FALSE(parse_json(std::string(1000000, '[')).ok());
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_FALSE(parse_ordered_json(objects).ok());
  EXPECT_TRUE(parse_json_or_discarded(nested(100000)).is_discarded());
}

TEST(JsonParse, ValueCountIsBounded) {
  JsonLimits limits;
  limits.max_values = 1000;
  std::string wide = "[";
  for (int i = 0; i < 999; ++i) wide += "0,";
  wide += "0]";  // 1000 numbers + the array = 1001 values
  auto r = parse_json(wide, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("more than 1000 values"), std::string::npos);
  limits.max_values = 1001;
  EXPECT_TRUE(parse_json(wide, limits).ok());
}

TEST(JsonParse, ParsesWhatNlohmannParsesAndReportsWhy) {
  auto j = parse_ordered_json(R"({"b": [1, 2.5, "x", null, true], "a": {"c": -3}})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->dump(), R"({"b":[1,2.5,"x",null,true],"a":{"c":-3}})");  // order kept
  for (const std::string bad :
       {"", "{", "[1,]", "{\"a\" 1}", "1e400", "\"\\ud800\"", "[1] x", "\"\xff\""}) {
    auto r = parse_json(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_FALSE(r.message().empty()) << bad;
  }
}

// The heap one parse takes, at its peak, for inputs built to cost the most per byte (values
// that each allocate a container) and ordinary ones: at most 32x the input plus 64 KiB, and
// never more than about 48 MiB however long the input.
TEST(JsonParse, HeapStaysWithinAMultipleOfTheInput) {
  auto repeat = [](const std::string& unit, size_t bytes, const std::string& open,
                   const std::string& close) {
    std::string s = open;
    while (s.size() + unit.size() + close.size() < bytes) s += unit;
    if (s.back() == ',') s.pop_back();
    return s + close;
  };
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"empty arrays", repeat("[],", 1 << 20, "[", "]")},
      {"empty objects", repeat("{},", 1 << 20, "[", "]")},
      {"small objects", repeat("{\"a\":1},", 1 << 20, "[", "]")},
      {"numbers", repeat("1,", 1 << 20, "[", "]")},
      {"keys",
       [] {
         std::string s = "{";
         for (int i = 0; s.size() < (1 << 20); ++i) s += "\"k" + std::to_string(i) + "\":[],";
         s.back() = '}';
         return s;
       }()},
      {"a long string", "{\"s\":\"" + std::string(1 << 20, 'a') + "\"}"},
      {"empty arrays past the value limit", repeat("[],", 8 << 20, "[", "]")},
  };
  for (const auto& [name, text] : inputs) {
    live = 0;
    peak = 0;
    tracking = true;
    {
      auto r = parse_json(text);
      (void)r;
    }
    tracking = false;
    const auto bytes = static_cast<int64_t>(text.size());
    EXPECT_LE(peak.load(), std::min<int64_t>(32 * bytes + (64 << 10), int64_t{48} << 20))
        << name << ": " << peak.load() << " bytes of heap for " << bytes << " bytes of JSON";
  }
}

// Every JSON parse of outside bytes goes through common/json_parse: no other file calls
// nlohmann's parser directly (it has no depth limit).
TEST(JsonParse, NoSourceFileParsesJsonAnotherWay) {
  const std::filesystem::path src = std::filesystem::path(TANGRAM_SOURCE_DIR) / "src";
  const std::regex direct(
      R"((json|basic_json<[^>]*>)\s*::\s*(parse|sax_parse|accept|from_cbor|from_msgpack)\s*\()");
  std::vector<std::string> offenders;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
    if (e.path().filename() == "json_parse.cpp") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    if (std::regex_search(s, direct)) offenders.push_back(e.path().string());
  }
  EXPECT_TRUE(offenders.empty()) << "parse JSON with tangram::parse_json: " << offenders.front();
}

}  // namespace
}  // namespace tangram
