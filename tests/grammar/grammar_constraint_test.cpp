#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

using nlohmann::json;

std::shared_ptr<const OutputGrammar> grammar_of(const char* schema) {
  Result<JsonSchemaGraph> g = compile_json_schema(json::parse(schema));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.message());
  return std::make_shared<const OutputGrammar>(OutputGrammar::json_value(std::move(*g)));
}

// The plain reference: every token asked on its own.
std::vector<uint8_t> allowed_one_by_one(const GrammarConstraint& c, int32_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) out[static_cast<size_t>(id)] = c.allows(id) ? 1 : 0;
  return out;
}

// Walks a constraint through `text` token by token (pieces chosen greedily, longest first) and
// checks, at every step, that the trie mask equals the per-token reference.
void check_masks_along(const std::shared_ptr<const OutputGrammar>& g,
                       const std::shared_ptr<const TokenTexts>& texts, std::mt19937_64& rng) {
  GrammarConstraint c(g, texts);
  std::vector<uint8_t> fast;
  std::string written;
  for (int step = 0; step < 40 && !c.must_end(); ++step) {
    c.allowed_tokens(texts->n_vocab(), fast);
    const std::vector<uint8_t> plain = allowed_one_by_one(c, texts->n_vocab());
    ASSERT_EQ(fast, plain) << "step " << step;
    std::vector<int32_t> options;
    for (int32_t id = 0; id < texts->n_vocab(); ++id)
      if (plain[static_cast<size_t>(id)] != 0 && texts->kind(id) == TokenTexts::Kind::Text)
        options.push_back(id);
    if (options.empty()) {  // only the end is left
      ASSERT_TRUE(c.may_end()) << "a dead end after: " << written;
      return;
    }
    const int32_t pick = options[rng() % options.size()];
    written += texts->piece(pick);
    c.accept(pick);
  }
}

TEST(GrammarConstraint, TrieMaskEqualsPerTokenChecksOnARealVocabulary) {
  auto file = GgufFile::open(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto texts = TokenTexts::from_tokenizer(**tok);
  std::mt19937_64 rng(7);
  for (
      const char* schema :
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"}}, "required": ["n"]})",
       R"({"type": "array", "items": {"enum": ["once", "upon", 3]}})", R"({})"}) {
    check_masks_along(grammar_of(schema), texts, rng);
  }
}

// Byte-level BPE with 151k tokens (Qwen2): the mask agrees with the per-token reference at
// states inside a key, a string, a number and between values. The times are printed, not judged.
TEST(GrammarConstraint, TrieMaskOnALargeByteLevelVocabulary) {
  auto file =
      GgufFile::open(testing::data_file("models/llama.cpp-vocab/ggml-vocab-qwen2.gguf").string());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto texts = TokenTexts::from_tokenizer(**tok);
  ASSERT_GT(texts->n_vocab(), 100000);
  auto g = grammar_of(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "units": {"enum": ["metric", "imperial"]}}, "required": ["city"], "additionalProperties": false})");
  using Clock = std::chrono::steady_clock;
  for (const char* prefix :
       {"", R"({"ci)", R"({"city":"Os)", R"({"city":"Oslo","days":1)", R"({"city":"x",)"}) {
    GrammarConstraint c(g, texts);
    OutputMatcher check(g);
    ASSERT_TRUE(check.feed(prefix)) << prefix;
    // Reach the state through tokens: the prefix's own encoding.
    for (int32_t id : (*tok)->encode(prefix, /*add_special=*/false, /*parse_special=*/false)) {
      ASSERT_TRUE(c.allows(id)) << prefix;
      c.accept(id);
    }
    std::vector<uint8_t> fast;
    const auto t0 = Clock::now();
    c.allowed_tokens(texts->n_vocab(), fast);
    const auto t1 = Clock::now();
    const std::vector<uint8_t> plain = allowed_one_by_one(c, texts->n_vocab());
    const auto t2 = Clock::now();
    EXPECT_EQ(fast, plain) << prefix;
    const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    std::cout << "mask after '" << prefix << "': " << std::count(fast.begin(), fast.end(), 1)
              << " allowed, trie " << ms(t1 - t0) << " ms, per-token " << ms(t2 - t1) << " ms\n";
  }
}

// Random walks through several schemas on Qwen2's vocabulary: the trie mask (its string-cursor
// walk, the per-scanner-state lookup inside unbounded strings, the bounded strings, several
// anyOf paths at once) equals the per-token reference at every step. Tokens are drawn among the
// allowed ones, so walks pass through split UTF-8 characters and escapes too.
TEST(GrammarConstraint, TrieMaskEqualsPerTokenChecksOnRandomWalksOverQwen2) {
  auto file =
      GgufFile::open(testing::data_file("models/llama.cpp-vocab/ggml-vocab-qwen2.gguf").string());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto texts = TokenTexts::from_tokenizer(**tok);
  std::mt19937_64 rng(18);
  for (
      const char* schema : {
          R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 6},
               "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}, "required": ["title", "tags"]})",
          R"({"anyOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 2},
               {"type": "integer"}]})",
          R"({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}},
               "additionalProperties": {"type": "number"}})",
          R"({"type": "string"})"}) {
    SCOPED_TRACE(schema);
    GrammarConstraint c(grammar_of(schema), texts);
    std::vector<uint8_t> fast;
    for (int step = 0; step < 10 && !c.must_end(); ++step) {
      c.allowed_tokens(texts->n_vocab(), fast);
      const std::vector<uint8_t> plain = allowed_one_by_one(c, texts->n_vocab());
      ASSERT_EQ(fast, plain) << "step " << step;
      std::vector<int32_t> options;
      for (int32_t id = 0; id < texts->n_vocab(); ++id)
        if (plain[static_cast<size_t>(id)] != 0 && texts->kind(id) == TokenTexts::Kind::Text)
          options.push_back(id);
      if (options.empty()) break;
      // Every other step, a token that leaves a character or an escape unfinished where one is
      // allowed: the string scanner's other states.
      std::vector<int32_t> unfinished;
      for (int32_t id : options) {
        const std::string& p = texts->piece(id);
        if (static_cast<uint8_t>(p.back()) >= 0xC0 || p.back() == '\\') unfinished.push_back(id);
      }
      const std::vector<int32_t>& from =
          step % 2 == 1 && !unfinished.empty() ? unfinished : options;
      c.accept(from[rng() % from.size()]);
    }
  }
}

// Every state a small vocabulary reaches in four tokens, strings bounded and not: the trie mask
// equals the per-token reference, through split UTF-8 characters, escapes and \u escapes near
// the length bound and at the closing quote.
void check_every_state(const GrammarConstraint& c, const std::shared_ptr<const TokenTexts>& texts,
                       int depth) {
  std::vector<uint8_t> fast;
  c.allowed_tokens(texts->n_vocab(), fast);
  const std::vector<uint8_t> plain = allowed_one_by_one(c, texts->n_vocab());
  ASSERT_EQ(fast, plain);
  if (depth == 0) return;
  for (int32_t id = 0; id < texts->n_vocab(); ++id) {
    if (plain[static_cast<size_t>(id)] == 0 || texts->kind(id) != TokenTexts::Kind::Text) continue;
    GrammarConstraint next = c;
    next.accept(id);
    SCOPED_TRACE(texts->piece(id));
    check_every_state(next, texts, depth - 1);
  }
}

TEST(GrammarConstraint, TrieMaskEqualsPerTokenChecksInEveryStringStateOfASmallVocabulary) {
  using K = TokenTexts::Kind;
  const std::vector<std::string> pieces{"\"",
                                        "a",
                                        "ab",
                                        "\xC3",
                                        "\xA9",
                                        "\xA9"
                                        "b",
                                        "\xA9\"",
                                        "b\"",
                                        "\\",
                                        "\\n",
                                        "u00",
                                        "e9",
                                        "\"]",
                                        "[",
                                        "[\"",
                                        ",",
                                        "\xC3\xA9"};
  auto texts = std::make_shared<const TokenTexts>(pieces, std::vector<K>(pieces.size(), K::Text));
  for (const char* schema : {R"({"type": "string"})", R"({"type": "string", "maxLength": 1})",
                             R"({"type": "string", "maxLength": 2, "minLength": 1})",
                             R"({"type": "array", "items": {"type": "string", "maxLength": 3}})"}) {
    SCOPED_TRACE(schema);
    check_every_state(GrammarConstraint(grammar_of(schema), texts), texts, 4);
  }
}

// The trie holds each text token once, at the node whose prefix is its bytes, and each node's
// subtree is exactly the nodes below it.
TEST(TokenTrie, EveryTokenAtItsPrefixAndSubtreesNest) {
  const std::vector<std::string> pieces{"ab", "a", "abc", "b", "ab", "", "ba", "abd", "\xff"};
  const TokenTrie trie(pieces, {0, 1, 2, 3, 4, 6, 7, 8});
  std::vector<std::string> prefix_of{""};  // [node]
  std::vector<int32_t> seen;
  for (int32_t node = 1; node < trie.size(); ++node) {
    const auto d = static_cast<size_t>(trie.depth(node));
    ASSERT_GE(d, 1U);
    // The parent is the nearest node before at depth d - 1; its subtree holds this one.
    int32_t parent = node - 1;
    while (static_cast<size_t>(trie.depth(parent)) != d - 1) --parent;
    EXPECT_LE(node, trie.subtree_end(parent) - 1);
    EXPECT_LE(trie.subtree_end(node), trie.subtree_end(parent));
    prefix_of.push_back(prefix_of[static_cast<size_t>(parent)] +
                        static_cast<char>(trie.byte(node)));
    for (int32_t id : trie.tokens(node)) {
      EXPECT_EQ(pieces[static_cast<size_t>(id)], prefix_of.back());
      seen.push_back(id);
    }
  }
  EXPECT_TRUE(trie.tokens(0).empty());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 2, 3, 4, 6, 7, 8}));
  EXPECT_EQ(trie.size(), 8);  // the root, a, ab, abc, abd, b, ba, 0xFF
  EXPECT_EQ(trie.max_depth(), 3);
}

TEST(GrammarConstraint, TokenKindsAndEnding) {
  // Ids: 0 "{", 1 "}", 2 "{}", 3 "" (no bytes), 4 control, 5 end of generation, 6 "{\"", 7 " ".
  using K = TokenTexts::Kind;
  auto texts = std::make_shared<const TokenTexts>(
      std::vector<std::string>{"{", "}", "{}", "", "<s>", "</s>", "{\"", " "},
      std::vector<K>{K::Text, K::Text, K::Text, K::Text, K::Never, K::EndOfGeneration, K::Text,
                     K::Text});
  auto g = grammar_of(R"({"type": "object", "additionalProperties": false})");
  GrammarConstraint c(g, texts);
  EXPECT_TRUE(c.allows(0));
  EXPECT_TRUE(c.allows(2));
  EXPECT_FALSE(c.allows(1));
  EXPECT_FALSE(c.allows(3));
  EXPECT_FALSE(c.allows(4));
  EXPECT_FALSE(c.allows(5));  // nothing written yet
  EXPECT_FALSE(c.allows(6));  // no property may be named
  EXPECT_FALSE(c.allows(7));  // compact JSON: no blank before the value
  EXPECT_FALSE(c.allows(-1));
  EXPECT_FALSE(c.allows(99));
  auto copy = c.clone();
  c.accept(2);
  EXPECT_TRUE(c.must_end());
  EXPECT_TRUE(c.may_end());
  EXPECT_TRUE(c.allows(5));
  EXPECT_FALSE(copy->must_end());  // the clone kept its own state
  std::vector<uint8_t> mask;
  c.allowed_tokens(8, mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 0}));
}

}  // namespace
}  // namespace tangram
