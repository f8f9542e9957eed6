// Real chat templates with fuzzed conversations: the input picks one of a few real templates and
// gives the messages' roles, contents and optional fields (anything a client can send through
// /v1/chat/completions). Rendering may refuse (raise_exception on a bad role order); it may not
// crash.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz_support.h"

using namespace tangram;

namespace {

// One template of each family the engine meets most, plus the most feature-heavy ones.
constexpr const char* kTemplates[] = {
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja",
    "google-gemma-2-2b-it.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "openai-gpt-oss-120b.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja",
    "Qwen3-Coder.jinja",
};

std::vector<ChatTemplate> load_templates() {
  std::vector<ChatTemplate> out;
  for (const char* name : kTemplates) {
    std::ifstream in(fuzz::shared_file(std::string("models/chat-templates/") + name),
                     std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto t = ChatTemplate::parse(std::move(text));
    TG_FUZZ_CHECK(t.ok());
    out.push_back(std::move(t).value());
  }
  return out;
}

// Splits the input at '\x1e' (record separator) into fields; each message takes a header byte
// (role and which optional fields are set) followed by its fields.
std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find('\x1e', start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ChatTemplate> templates = load_templates();
  if (size < 2) return 0;
  const ChatTemplate& tmpl = templates[data[0] % templates.size()];
  const bool add_generation_prompt = data[0] & 0x80;
  static constexpr const char* kRoles[] = {"system", "user",      "assistant",
                                           "tool",   "developer", "function"};
  const std::vector<std::string_view> parts =
      split({reinterpret_cast<const char*>(data + 1), size - 1});
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < parts.size() && messages.size() < 16; ++i) {
    std::string_view p = parts[i];
    const uint8_t header = p.empty() ? 0 : static_cast<uint8_t>(p[0]);
    if (!p.empty()) p.remove_prefix(1);
    ChatMessage m;
    // Mostly the roles templates expect; sometimes the field's own bytes, as a client may send.
    m.role = (header & 7) < 6 ? kRoles[header & 7] : std::string(p.substr(0, 12));
    m.content = std::string(p);
    if (header & 0x08) m.reasoning_content = std::string(p.substr(p.size() / 2));
    if (header & 0x10) m.name = std::string(p.substr(0, 8));
    if (header & 0x20) m.tool_call_id = std::string(p.substr(0, 8));
    if (header & 0x40) {
      // Arguments as a JSON string or an object, as clients send both.
      nlohmann::ordered_json call = {{"type", "function"},
                                     {"id", "call_0"},
                                     {"function", {{"name", std::string(p.substr(0, 6))}}}};
      auto args = nlohmann::ordered_json::parse(p, nullptr, false);
      call["function"]["arguments"] =
          args.is_discarded() ? nlohmann::ordered_json(std::string(p)) : args;
      m.tool_calls = nlohmann::ordered_json::array({call});
    }
    messages.push_back(std::move(m));
  }
  RenderOptions options;
  options.now_unix_seconds = 1'700'000'000;
  auto context =
      ChatTemplate::make_context(messages, add_generation_prompt, "<s>", "</s>", nullptr);
  if (!context.ok()) return 0;
  (void)tmpl.render_context(*context, options);
  return 0;
}
