// JSON Schema compiler and output matcher: the input is a schema's text, a NUL, then choice
// bytes. A schema is refused with a message or compiled; the choice bytes then steer a walk
// through the matcher (each picks one of the bytes it allows), and every prefix the matcher
// lets end must parse as JSON. The walk must never reach a state that allows no byte and may
// not end (a dead end would let constrained decoding paint itself into a corner).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "grammar/output_matcher.h"

using namespace tangram;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view schema_text = input.substr(0, split);
  const std::string_view choices =
      split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  const nlohmann::json schema =
      nlohmann::json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  Result<JsonSchemaGraph> graph = compile_json_schema(schema);
  if (!graph.ok()) {
    TG_FUZZ_CHECK(!graph.message().empty());
    return 0;
  }
  auto grammar =
      std::make_shared<const OutputGrammar>(OutputGrammar::json_value(std::move(*graph)));
  OutputMatcher m(grammar);
  std::string out;
  for (char choice : choices) {
    if (m.may_end()) {
      const auto parsed = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
      TG_FUZZ_CHECK(!parsed.is_discarded());
    }
    std::vector<uint8_t> allowed;
    for (int c = 0; c < 256; ++c) {
      OutputMatcher trial = m;
      if (trial.feed_byte(static_cast<uint8_t>(c))) allowed.push_back(static_cast<uint8_t>(c));
    }
    TG_FUZZ_CHECK(!allowed.empty() || m.may_end());
    if (allowed.empty()) break;
    const uint8_t next = allowed[static_cast<uint8_t>(choice) % allowed.size()];
    TG_FUZZ_CHECK(m.feed_byte(next));
    out += static_cast<char>(next);
  }
  return 0;
}
