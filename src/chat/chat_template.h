// Chat templates: turns a conversation into the prompt text a model expects, by running the
// model's Hugging Face Jinja chat template (from GGUF metadata `tokenizer.chat_template`) with
// the same settings transformers uses (trim_blocks, lstrip_blocks, raise_exception,
// strftime_now, tojson as json.dumps with ensure_ascii=False). Built-in templates cover models
// whose GGUF has none.
//
// Errors are values: a template using an unsupported construct fails to parse (or render) with
// an Error naming the construct and the template line; rendering is bounded in work, output size
// and recursion depth.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/text_range.h"

namespace tangram {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  // Optional fields. A template sees them only when set, so `message.tool_calls is defined` is
  // false for plain messages, as with Hugging Face's message dicts.
  std::optional<nlohmann::ordered_json> tool_calls;  // [{"type": "function", "function": {...}}]
  std::optional<std::string> reasoning_content;
  std::optional<std::string> tool_call_id;
  std::optional<std::string> name;
};

// The dict a template sees for one message (role, content, then the optional fields that are set).
nlohmann::ordered_json chat_message_to_json(const ChatMessage& message);

// A rendered prompt and the byte ranges of it that spell a special-token text written by the
// caller (in a message or an extra variable) rather than by the template.
struct RenderedChat {
  std::string text;
  std::vector<TextRange> protected_ranges;  // sorted, not overlapping
};

struct RenderOptions {
  // strftime_now's clock, as Unix seconds read as UTC; nullopt uses the local time now.
  std::optional<int64_t> now_unix_seconds;
  int64_t max_steps = 4'000'000;  // loop iterations, calls and filter element visits
  size_t max_output_bytes = size_t{64} << 20;
  int max_call_depth = 64;  // nested macro calls
};

class ChatTemplate {
 public:
  // Parses a Jinja chat template. Unsupported tags, bad syntax and over-deep nesting are Errors
  // ("chat template: line N: ...").
  static Result<ChatTemplate> parse(std::string source);
  // A built-in template: "chatml", "llama3" or "llama2".
  static Result<ChatTemplate> builtin(std::string_view name);
  // Guesses the prompt format of a template from its special tokens: "llama3", "chatml",
  // "llama2", "mistral", "gemma", "phi3", "deepseek", or "unknown". The first three have a
  // builtin() of the same name.
  static std::string_view detect_family(std::string_view source);

  // Renders a conversation. The context holds `messages` (a list of dicts),
  // `add_generation_prompt`, `bos_token`, `eos_token`, then every key of `extra` (a JSON object or
  // null), e.g. `tools`, `enable_thinking`, `date_string`; extra keys override the standard ones.
  Result<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             const std::string& bos_token, const std::string& eos_token,
                             const nlohmann::json& extra = {}) const;

  // render(), and where the messages (every string in them, keys included) or `extra` spell one
  // of `special_texts` (the tokenizer's control-token texts), that occurrence comes back as a
  // protected range, so that encoding the text cannot turn a client's words into a role marker
  // or an end of turn: only the template's own markup can. Each occurrence is replaced by a
  // sentinel code point that appears nowhere in the template or the context while the template
  // runs, then mapped back; so the text is render()'s, except where a template inspects the
  // content for a control-token text (it does not find it) or measures it.
  Result<RenderedChat> render_protected(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, const std::string& bos_token,
                                        const std::string& eos_token,
                                        const std::vector<std::string>& special_texts,
                                        const nlohmann::json& extra = {}) const;

  // The context render() builds.
  static Result<nlohmann::ordered_json> make_context(const std::vector<ChatMessage>& messages,
                                                     bool add_generation_prompt,
                                                     const std::string& bos_token,
                                                     const std::string& eos_token,
                                                     const nlohmann::json& extra);
  // Renders with `context` (a JSON object) as the template's variables.
  Result<std::string> render_context(const nlohmann::ordered_json& context,
                                     const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  struct Program;
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;  // immutable, shared by copies; render is thread-safe
};

}  // namespace tangram
