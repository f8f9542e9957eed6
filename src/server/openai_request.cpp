#include "server/openai_request.h"

#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tangram::server {
namespace {

using nlohmann::json;

// Token ids of an array, each an integer in [0, vocab_size).
std::optional<ApiError> read_token_ids(const json& arr, const char* field, int32_t vocab_size,
                                       std::vector<int32_t>& out) {
  for (const json& t : arr) {
    if (!t.is_number_integer()) return wrong_type(std::string(field) + "[]", "a token id (integer)", t);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab_size)
      return bad_request(fmt::format("token id {} is outside the vocabulary [0, {})", t.dump(), vocab_size), field,
                         "invalid_token");
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// Features that change the shape or meaning of a response: refused, not ignored.
std::optional<ApiError> refuse_unsupported(const json& j) {
  if (auto it = j.find("n"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return wrong_type("n", "an integer", *it);
    if (it->get<int64_t>() != 1)
      return bad_request("only n = 1 is supported (one choice per request)", "n", "unsupported_value");
  }
  for (const char* f : {"logprobs", "top_logprobs"}) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    if (std::string(f) == "logprobs" && it->is_number_integer() && it->get<int64_t>() == 0) continue;
    return bad_request(fmt::format("'{}' is not supported by this server", f), f, "unsupported_parameter");
  }
  for (const char* f : {"tools", "functions", "tool_choice", "function_call", "logit_bias", "suffix",
                        "audio", "modalities", "prediction"}) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null()) continue;
    if ((it->is_array() || it->is_object()) && it->empty()) continue;
    if (std::string(f) == "tool_choice" && it->is_string() && it->get<std::string>() == "none") continue;
    return bad_request(fmt::format("'{}' is not supported by this server", f), f, "unsupported_parameter");
  }
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("response_format", "an object", *it);
    auto t = it->find("type");
    if (t == it->end() || !t->is_string() || t->get<std::string>() != "text")
      return bad_request("only response_format {\"type\": \"text\"} is supported", "response_format",
                         "unsupported_value");
  }
  return std::nullopt;
}

std::optional<ApiError> read_generation(const json& j, const RequestDefaults& defaults, bool chat,
                                        GenerationFields& g) {
  g.params = defaults.params;
  if (auto e = refuse_unsupported(j)) return e;
  if (auto e = read_string(j, "model", g.model)) return e;
  const int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  int64_t max_tokens = 0;
  if (auto e = read_int(j, "max_tokens", 1, kMaxTokens, max_tokens)) return e;
  if (chat) {
    int64_t mct = 0;
    if (auto e = read_int(j, "max_completion_tokens", 1, kMaxTokens, mct)) return e;
    if (mct > 0) max_tokens = mct;
  }
  g.params.max_tokens = static_cast<int>(max_tokens);
  if (auto e = read_sampling(j, g.params)) return e;
  if (auto e = read_bool(j, "stream", g.stream)) return e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("stream_options", "an object", *it);
    if (!g.stream) return bad_request("'stream_options' is only allowed with \"stream\": true", "stream_options");
    if (auto e = read_bool(*it, "include_usage", g.include_usage)) return e;
  }
  if (auto e = read_string(j, "session_id", g.session_id)) return e;
  if (!g.session_id.empty() && !valid_session_id(g.session_id))
    return bad_request("'session_id' must be 1 to 128 characters of A-Z a-z 0-9 . _ : -", "session_id",
                       "invalid_session_id");
  if (Status st = g.params.validate(); !st.ok()) return bad_request(st.message());
  return std::nullopt;
}

// A message's content: a string, or an array of text parts ({"type": "text", "text": ...}).
std::variant<std::string, ApiError> read_content(const json& m, size_t index, bool may_be_null) {
  const std::string field = fmt::format("messages[{}].content", index);
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    if (may_be_null) return std::string();
    return bad_request(fmt::format("'{}' is missing", field), field, "missing_field");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return wrong_type(field, "a string or an array of content parts", *it);
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object()) return wrong_type(field + "[]", "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return bad_request(fmt::format("each part of '{}' needs a string 'type'", field), field, "missing_field");
    if (type->get<std::string>() != "text")
      return bad_request(fmt::format("'{}': only text parts are supported, got a '{}' part", field,
                                     type->get<std::string>()),
                         field, "unsupported_value");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) return bad_request(fmt::format("a text part of '{}' needs a string 'text'", field), field, "missing_field");
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

bool valid_session_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::variant<ChatCompletionRequest, ApiError> parse_chat_request(const std::string& body,
                                                                 const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  ChatCompletionRequest r;
  if (auto e = read_generation(j, defaults, /*chat=*/true, r.gen)) return *e;
  auto msgs = j.find("messages");
  if (msgs == j.end() || msgs->is_null()) return bad_request("'messages' is required", "messages", "missing_field");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return bad_request("'messages' must hold at least one message", "messages", "empty_messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(field, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad_request(fmt::format("'{}.role' is required and must be a string", field), field + ".role",
                         "missing_field");
    std::string r_name = role->get<std::string>();
    if (r_name == "developer") r_name = "system";  // OpenAI's newer name for the system role
    if (r_name != "system" && r_name != "user" && r_name != "assistant" && r_name != "tool")
      return bad_request(fmt::format("'{}.role' must be system, developer, user, assistant or tool; got '{}'",
                                     field, role->get<std::string>()),
                         field + ".role", "invalid_value");
    auto content = read_content(m, i, /*may_be_null=*/r_name == "assistant");
    if (auto* e = std::get_if<ApiError>(&content)) return *e;
    ChatMessage msg;
    msg.role = std::move(r_name);
    msg.content = std::move(std::get<std::string>(content));
    if (auto name = m.find("name"); name != m.end() && !name->is_null()) {
      if (!name->is_string()) return wrong_type(field + ".name", "a string", *name);
      msg.name = name->get<std::string>();
    }
    r.messages.push_back(std::move(msg));
  }
  bool any_user = false;
  for (const ChatMessage& m : r.messages) any_user = any_user || m.role == "user";
  if (!any_user) return bad_request("'messages' must hold at least one user message", "messages", "empty_messages");
  return r;
}

std::variant<CompletionRequest, ApiError> parse_completion_request(const std::string& body,
                                                                   const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  CompletionRequest r;
  if (auto e = read_generation(j, defaults, /*chat=*/false, r.gen)) return *e;
  if (r.gen.params.max_tokens == 0 && !j.contains("max_tokens")) r.gen.params.max_tokens = 16;  // OpenAI's default
  if (auto e = read_bool(j, "echo", r.echo)) return e.value();
  auto p = j.find("prompt");
  if (p == j.end() || p->is_null()) return bad_request("'prompt' is required", "prompt", "missing_field");
  if (p->is_string()) {
    if (p->get_ref<const std::string&>().empty()) return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
    r.prompt = p->get<std::string>();
  } else if (p->is_array()) {
    if (p->empty()) return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
    if ((*p)[0].is_string()) {
      if (p->size() != 1)
        return bad_request("only one prompt per request is supported (send a string)", "prompt", "unsupported_value");
      if ((*p)[0].get_ref<const std::string&>().empty()) return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
      r.prompt = (*p)[0].get<std::string>();
    } else {
      for (const json& t : *p)
        if (t.is_array()) return bad_request("only one prompt per request is supported", "prompt", "unsupported_value");
      std::vector<int32_t> ids;
      if (auto e = read_token_ids(*p, "prompt", defaults.vocab_size, ids)) return *e;
      r.prompt = std::move(ids);
    }
  } else {
    return wrong_type("prompt", "a string, an array of strings or an array of token ids", *p);
  }
  return r;
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  TokenizeRequest r;
  auto c = j.find("content");
  if (c == j.end() || !c->is_string())
    return c == j.end() ? bad_request("'content' is required", "content", "missing_field")
                        : wrong_type("content", "a string", *c);
  r.content = c->get<std::string>();
  if (auto e = read_bool(j, "add_special", r.add_special)) return *e;
  if (auto e = read_bool(j, "parse_special", r.parse_special)) return *e;
  if (auto e = read_bool(j, "with_pieces", r.with_pieces)) return *e;
  return r;
}

std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(const std::string& body, int32_t vocab_size) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  auto t = j.find("tokens");
  if (t == j.end()) return bad_request("'tokens' is required", "tokens", "missing_field");
  if (!t->is_array()) return wrong_type("tokens", "an array of token ids", *t);
  DetokenizeRequest r;
  if (auto e = read_token_ids(*t, "tokens", vocab_size, r.tokens)) return *e;
  return r;
}

}  // namespace tangram::server
