// Jinja lexer, parser and interpreter: arbitrary bytes as a chat template, rendered with a fixed
// conversation (system, user, assistant with a tool call and reasoning, tool answer) and tools.
// Parsing or rendering may fail with an Error; neither may crash, hang or exceed its bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz_support.h"

using namespace tangram;

namespace {

std::vector<ChatMessage> fixed_messages() {
  std::vector<ChatMessage> m(5);
  m[0].role = "system";
  m[0].content = "You are terse.";
  m[1].role = "user";
  m[1].content = "What is the weather in Paris? \xc3\xa9\xe2\x82\xac";
  m[2].role = "assistant";
  m[2].content = "";
  m[2].reasoning_content = "Call the tool.";
  m[2].tool_calls = nlohmann::ordered_json::parse(
      R"([{"type": "function", "id": "call_1", "function": {"name": "weather", "arguments": {"city": "Paris"}}}])");
  m[3].role = "tool";
  m[3].content = "{\"temp\": 21}";
  m[3].tool_call_id = "call_1";
  m[3].name = "weather";
  m[4].role = "user";
  m[4].content = "Thanks";
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = [] {
    const nlohmann::json extra =
        nlohmann::json::parse(R"({"tools": [{"type": "function", "function":
        {"name": "weather", "description": "Weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}}}}}], "enable_thinking": true})");
    return ChatTemplate::make_context(fixed_messages(), true, "<s>", "</s>", extra).value();
  }();
  auto tmpl = ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) return 0;
  // Smaller bounds than the server's keep each input fast; what they guard is the same.
  RenderOptions options;
  options.now_unix_seconds = 1'700'000'000;
  options.max_steps = 200'000;
  options.max_output_bytes = size_t{1} << 20;
  auto out = tmpl->render_context(context, options);
  if (out.ok()) TG_FUZZ_CHECK(out->size() <= options.max_output_bytes);
  return 0;
}
