// Constrained decoding's full-vocabulary mask (GrammarConstraint::allowed_tokens), the cost of a
// step whose drawn token the grammar refused, on Qwen2's 151k-token byte-level vocabulary, against
// the plain reference that asks allows() of every token. States: inside a JSON string (where
// nearly every token is allowed), inside a string nested in arrays and objects, inside a key, and
// between values. Compare the two lines of one state within one run (CPU time).
//
// The vocabulary is data/models/llama.cpp-vocab/ggml-vocab-qwen2.gguf in the repository
// (or $TANGRAM_DATA_DIR/models/...).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "grammar/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

struct Vocabulary {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTexts> texts;
};

const Vocabulary& qwen2() {
  static const Vocabulary v = [] {
    const char* env = std::getenv("TANGRAM_DATA_DIR");
    const std::filesystem::path shared = env && *env ? env : TANGRAM_SHARED_DEFAULT;
    const std::string path = (shared / "models/llama.cpp-vocab/ggml-vocab-qwen2.gguf").string();
    auto file = GgufFile::open(path);
    if (!file.ok()) {
      fprintf(stderr, "cannot open %s: %s\n", path.c_str(), file.message().c_str());
      std::exit(1);
    }
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok.ok()) {
      fprintf(stderr, "cannot read the tokenizer: %s\n", tok.message().c_str());
      std::exit(1);
    }
    Vocabulary out;
    out.tokenizer = std::move(*tok);
    out.texts = TokenTexts::from_tokenizer(*out.tokenizer);
    return out;
  }();
  return v;
}

constexpr const char* kSchema = R"({"type": "object", "properties": {
  "city": {"type": "string"}, "days": {"type": "integer", "minimum": 0, "maximum": 30},
  "stops": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
    "note": {"type": "string"}}, "required": ["name"]}}}, "required": ["city"], "additionalProperties": false})";

// The constraint after `prefix`, reached through the prefix's own tokens.
GrammarConstraint constraint_after(const char* prefix) {
  const Vocabulary& v = qwen2();
  Result<JsonSchemaGraph> graph = compile_json_schema(nlohmann::json::parse(kSchema));
  if (!graph.ok()) std::exit(1);
  GrammarConstraint c(
      std::make_shared<const OutputGrammar>(OutputGrammar::json_value(std::move(*graph))), v.texts);
  for (int32_t id : v.tokenizer->encode(prefix, /*add_special=*/false, /*parse_special=*/false)) {
    if (!c.allows(id)) {
      fprintf(stderr, "the schema refuses '%s'\n", prefix);
      std::exit(1);
    }
    c.accept(id);
  }
  return c;
}

const char* const kStates[] = {
    R"({"city": "Os)", R"({"city": "Oslo", "stops": [{"name": "Bergen", "note": "fj)",
    R"({"city": "Oslo", "stops": [{"name": "Ber)", R"({"ci)", R"({"city": "Oslo", )"};

void BM_Mask(benchmark::State& state) {
  const GrammarConstraint c = constraint_after(kStates[state.range(0)]);
  std::vector<uint8_t> mask;
  for (auto _ : state) {
    c.allowed_tokens(qwen2().texts->n_vocab(), mask);
    benchmark::DoNotOptimize(mask.data());
  }
  state.SetLabel(kStates[state.range(0)]);
}

void BM_PerTokenReference(benchmark::State& state) {
  const GrammarConstraint c = constraint_after(kStates[state.range(0)]);
  std::vector<uint8_t> mask(static_cast<size_t>(qwen2().texts->n_vocab()));
  for (auto _ : state) {
    for (int32_t id = 0; id < qwen2().texts->n_vocab(); ++id)
      mask[static_cast<size_t>(id)] = c.allows(id) ? 1 : 0;
    benchmark::DoNotOptimize(mask.data());
  }
  state.SetLabel(kStates[state.range(0)]);
}

BENCHMARK(BM_Mask)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PerTokenReference)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tangram

BENCHMARK_MAIN();
