#include "chat/chat_template.h"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_json.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace tangram {

namespace {

// Sentinels are CJK Extension B code points: one code point each (slicing and length cannot
// split them), printable for repr(), left alone by tojson, case mapping and strip, never
// whitespace. Any that occurs in the template or the context is not used.
constexpr char32_t kSentinelFirst = 0x20000;
constexpr char32_t kSentinelLast = 0x2A6DF;

// The four-byte UTF-8 sequence at s[i], if it is one, as a code point.
std::optional<char32_t> four_byte_at(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return std::nullopt;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  if ((b(0) & 0xF8) != 0xF0 || (b(1) & 0xC0) != 0x80 || (b(2) & 0xC0) != 0x80 ||
      (b(3) & 0xC0) != 0x80)
    return std::nullopt;
  return static_cast<char32_t>(((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) |
                               ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu));
}

std::string utf8_of(char32_t cp) {
  std::string out(4, '\0');
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

// Replaces the special texts in the context's caller-written strings by sentinels, and maps the
// sentinels in the rendered text back.
class Sentinels {
 public:
  explicit Sentinels(const std::vector<std::string>& special_texts) {
    for (const std::string& t : special_texts)
      if (!t.empty()) by_first_byte_[static_cast<uint8_t>(t[0])].push_back(&t);
    for (auto& bucket : by_first_byte_)
      std::stable_sort(
          bucket.begin(), bucket.end(),
          [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
  }

  // Code points in the sentinel block that occur in `s` are not used.
  void reserve_text(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i)
      if (auto cp = four_byte_at(s, i); cp && *cp >= kSentinelFirst && *cp <= kSentinelLast)
        used_.insert(*cp);
  }
  void reserve_used(const nlohmann::ordered_json& j) {
    if (j.is_string()) {
      reserve_text(j.get_ref<const std::string&>());
    } else if (j.is_object()) {
      for (const auto& [key, value] : j.items()) {
        reserve_text(key);
        reserve_used(value);
      }
    } else if (j.is_array()) {
      for (const auto& value : j) reserve_used(value);
    }
  }

  // Greedy left to right, the longest special text first: the tokenizer's own matching order.
  Result<std::string> hide_text(std::string_view s) {
    std::string out;
    size_t pos = 0;
    size_t copied = 0;
    while (pos < s.size()) {
      const std::string* hit = nullptr;
      for (const std::string* t : by_first_byte_[static_cast<uint8_t>(s[pos])]) {
        if (s.substr(pos).starts_with(*t)) {
          hit = t;
          break;
        }
      }
      if (hit == nullptr) {
        ++pos;
        continue;
      }
      TG_ASSIGN(char32_t cp, sentinel_for(*hit));
      out.append(s, copied, pos - copied);
      out += utf8_of(cp);
      pos += hit->size();
      copied = pos;
    }
    if (copied == 0) return std::string(s);
    out.append(s, copied);
    return out;
  }
  Result<nlohmann::ordered_json> hide(const nlohmann::ordered_json& j) {
    if (j.is_string()) {
      TG_ASSIGN(std::string hidden, hide_text(j.get_ref<const std::string&>()));
      return nlohmann::ordered_json(std::move(hidden));
    }
    if (j.is_object()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [key, value] : j.items()) {
        TG_ASSIGN(std::string hidden_key, hide_text(key));
        TG_ASSIGN(out[hidden_key], hide(value));
      }
      return out;
    }
    if (j.is_array()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& value : j) {
        TG_ASSIGN(auto hidden, hide(value));
        out.push_back(std::move(hidden));
      }
      return out;
    }
    return j;
  }

  RenderedChat reveal(std::string_view rendered) const {
    RenderedChat out;
    if (text_of_.empty()) {
      out.text = std::string(rendered);
      return out;
    }
    out.text.reserve(rendered.size());
    for (size_t i = 0; i < rendered.size();) {
      if (auto cp = four_byte_at(rendered, i)) {
        if (auto it = text_of_.find(*cp); it != text_of_.end()) {
          out.protected_ranges.push_back({out.text.size(), out.text.size() + it->second->size()});
          out.text += *it->second;
          i += 4;
          continue;
        }
      }
      out.text += rendered[i++];
    }
    return out;
  }

 private:
  Result<char32_t> sentinel_for(const std::string& text) {
    if (auto it = sentinel_of_.find(&text); it != sentinel_of_.end()) return it->second;
    while (next_ <= kSentinelLast && used_.count(next_) > 0) ++next_;
    if (next_ > kSentinelLast)
      return make_error("chat template: the messages hold too many kinds of special tokens");
    const char32_t cp = next_++;
    sentinel_of_.emplace(&text, cp);
    text_of_.emplace(cp, &text);
    return cp;
  }

  std::array<std::vector<const std::string*>, 256> by_first_byte_;  // each sorted longest first
  std::unordered_set<char32_t> used_;
  std::unordered_map<const std::string*, char32_t> sentinel_of_;
  std::unordered_map<char32_t, const std::string*> text_of_;
  char32_t next_ = kSentinelFirst;
};

}  // namespace

struct ChatTemplate::Program {
  std::string source;
  jinja::Body body;
};

nlohmann::ordered_json chat_message_to_json(const ChatMessage& message) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  m["role"] = message.role;
  m["content"] = message.content;
  if (message.tool_calls) m["tool_calls"] = *message.tool_calls;
  if (message.reasoning_content) m["reasoning_content"] = *message.reasoning_content;
  if (message.tool_call_id) m["tool_call_id"] = *message.tool_call_id;
  if (message.name) m["name"] = *message.name;
  return m;
}

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  // Hugging Face compiles chat templates with trim_blocks and lstrip_blocks.
  jinja::LexerOptions lexer_options;
  lexer_options.trim_blocks = true;
  lexer_options.lstrip_blocks = true;
  auto tokens = jinja::tokenize(source, lexer_options);
  if (!tokens.ok()) return make_error("chat template: {}", tokens.message());
  auto body = jinja::parse_template(tokens.value());
  if (!body.ok()) return make_error("chat template: {}", body.message());
  auto program = std::make_shared<Program>();
  program->source = std::move(source);
  program->body = std::move(body.value());
  return ChatTemplate(std::move(program));
}

const std::string& ChatTemplate::source() const { return program_->source; }

Result<nlohmann::ordered_json> ChatTemplate::make_context(const std::vector<ChatMessage>& messages,
                                                          bool add_generation_prompt,
                                                          const std::string& bos_token,
                                                          const std::string& eos_token,
                                                          const nlohmann::json& extra) {
  if (!extra.is_null() && !extra.is_object())
    return make_error("chat template: extra variables must be a JSON object, got {}",
                      extra.type_name());
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  auto list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back(chat_message_to_json(m));
  context["messages"] = std::move(list);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  if (extra.is_object())
    for (const auto& [key, value] : extra.items()) context[key] = nlohmann::ordered_json(value);
  return context;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token,
                                         const nlohmann::json& extra) const {
  TG_ASSIGN(auto context,
            make_context(messages, add_generation_prompt, bos_token, eos_token, extra));
  return render_context(context);
}

Result<RenderedChat> ChatTemplate::render_protected(const std::vector<ChatMessage>& messages,
                                                    bool add_generation_prompt,
                                                    const std::string& bos_token,
                                                    const std::string& eos_token,
                                                    const std::vector<std::string>& special_texts,
                                                    const nlohmann::json& extra) const {
  TG_ASSIGN(auto context,
            make_context(messages, add_generation_prompt, bos_token, eos_token, extra));
  Sentinels sentinels(special_texts);
  sentinels.reserve_text(program_->source);
  sentinels.reserve_used(context);
  // What the caller wrote: the messages and the extra variables. bos_token and eos_token are
  // the template's markup, whoever passes them.
  TG_ASSIGN(context["messages"], sentinels.hide(context["messages"]));
  if (extra.is_object()) {
    for (const auto& item : extra.items()) {
      const std::string& key = item.key();
      if (key == "messages" || key == "bos_token" || key == "eos_token") continue;
      TG_ASSIGN(context[key], sentinels.hide(context[key]));
    }
  }
  TG_ASSIGN(std::string rendered, render_context(context));
  return sentinels.reveal(rendered);
}

Result<std::string> ChatTemplate::render_context(const nlohmann::ordered_json& context,
                                                 const RenderOptions& options) const {
  if (!context.is_object())
    return make_error("chat template: the render context must be a JSON object");
  auto vars = jinja::value_from_json(context);
  if (!vars.ok()) return make_error("chat template: context: {}", vars.message());
  jinja::RenderLimits limits;
  limits.max_steps = options.max_steps;
  limits.max_output_bytes = options.max_output_bytes;
  limits.max_call_depth = options.max_call_depth;
  jinja::Interpreter interpreter(limits, options.now_unix_seconds);
  auto text = interpreter.render(program_->body, vars.value().as_dict());
  if (!text.ok()) return make_error("chat template: {}", text.message());
  return std::move(text.value());
}

}  // namespace tangram
