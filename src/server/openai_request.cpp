#include "server/openai_request.h"

#include "scheduler/request.h"
#include "server/json_fields.h"

#include <algorithm>
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
    if (!t.is_number_integer())
      return wrong_type(std::string(field) + "[]", "a token id (integer)", t);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab_size)
      return bad_request(
          fmt::format("token id {} is outside the vocabulary [0, {})", t.dump(), vocab_size), field,
          "invalid_token");
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// Features that change the shape or meaning of a response: refused, not ignored.
std::optional<ApiError> refuse_unsupported(const json& j, bool chat) {
  for (const char* f : {"tools", "functions", "tool_choice", "function_call", "logit_bias",
                        "suffix", "audio", "modalities", "prediction"}) {
    const bool chat_tools = std::string(f) == "tools" || std::string(f) == "tool_choice";
    if (chat && chat_tools) continue;  // read_tools
    auto it = j.find(f);
    if (it == j.end() || it->is_null()) continue;
    if ((it->is_array() || it->is_object()) && it->empty()) continue;
    if (std::string(f) == "tool_choice" && it->is_string() && it->get<std::string>() == "none")
      continue;
    return bad_request(fmt::format("'{}' is not supported by this server", f), f,
                       "unsupported_parameter");
  }
  // Server-side web search (chat) would change what the model knows: refused in any form.
  if (auto it = j.find("web_search_options"); chat && it != j.end() && !it->is_null())
    return bad_request("'web_search_options' is not supported by this server: it searches nothing",
                       "web_search_options", "unsupported_parameter");
  // best_of > 1 (completions) would sample several and return the best: not done, so refused.
  if (auto it = j.find("best_of");
      it != j.end() && !it->is_null() && !(it->is_number_integer() && *it == 1))
    return bad_request(
        "'best_of' is not supported by this server (only 1); use 'n' for several choices",
        "best_of", "unsupported_parameter");
  return std::nullopt;
}

// Chat: "logprobs": true with "top_logprobs" 0-20 alternatives; completions: "logprobs" 0-5.
std::optional<ApiError> read_logprobs(const json& j, bool chat, int& top) {
  if (!chat) {
    int64_t n = -1;
    if (auto e = read_int(j, "logprobs", 0, 5, n)) return e;
    top = static_cast<int>(n);
    return std::nullopt;
  }
  bool on = false;
  if (auto e = read_bool(j, "logprobs", on)) return e;
  int64_t n = -1;
  if (auto e = read_int(j, "top_logprobs", 0, 20, n)) return e;
  if (n >= 0 && !on)
    return bad_request("'top_logprobs' needs \"logprobs\": true", "top_logprobs", "invalid_value");
  top = on ? static_cast<int>(std::max<int64_t>(n, 0)) : -1;
  return std::nullopt;
}

std::optional<ApiError> read_generation(const json& j, const RequestDefaults& defaults, bool chat,
                                        GenerationFields& g) {
  g.params = defaults.params;
  if (auto e = refuse_unsupported(j, chat)) return e;
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
    if (!g.stream)
      return bad_request("'stream_options' is only allowed with \"stream\": true",
                         "stream_options");
    if (auto e = read_bool(*it, "include_usage", g.include_usage)) return e;
  }
  if (auto e = read_logprobs(j, chat, g.top_logprobs)) return e;
  int64_t n = 1;
  if (auto e = read_int(j, "n", 1, kMaxChoices, n)) return e;
  g.n = static_cast<int>(n);
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    auto format = parse_output_format(*it, "response_format", /*nested=*/true);
    if (auto* e = std::get_if<ApiError>(&format)) return *e;
    g.format = std::move(std::get<std::optional<OutputFormat>>(format));
  }
  if (auto e = read_session_id(j, g.session_id)) return e;
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
      return bad_request(fmt::format("each part of '{}' needs a string 'type'", field), field,
                         "missing_field");
    if (type->get<std::string>() != "text")
      return bad_request(fmt::format("'{}': only text parts are supported, got a '{}' part", field,
                                     type->get<std::string>()),
                         field, "unsupported_value");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string())
      return bad_request(fmt::format("a text part of '{}' needs a string 'text'", field), field,
                         "missing_field");
    text += t->get<std::string>();
  }
  return text;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}], as the
// templates take them; tool_choice: "none", "auto", "required" or a named function (the last two
// force a call through constrained decoding, server/output_constraint.h).
std::optional<ApiError> read_tools(const json& j, ChatCompletionRequest& r) {
  if (auto e = read_function_tools(j, r.tools)) return e;
  if (auto e = read_bool(j, "parallel_tool_calls", r.parallel_tool_calls)) return e;
  auto choice = j.find("tool_choice");
  if (choice == j.end() || choice->is_null()) return std::nullopt;
  bool none = false;
  auto parsed = parse_tool_choice(*choice, none);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  r.tool_choice = std::get<ToolChoice>(parsed);
  if (none) r.tools = json::array();  // the model is not told of them
  if (r.tool_choice.mode != ToolChoice::Mode::Auto && r.tools.empty())
    return bad_request("'tool_choice' asks for a tool call but 'tools' is empty", "tool_choice",
                       "invalid_value");
  return std::nullopt;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments"}}]. Arguments are sent as JSON text; templates read them as an object, as Hugging
// Face's do.
std::optional<ApiError> read_tool_calls(const json& m, const std::string& field, ChatMessage& msg) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  auto each = [&](const json& c, const std::string& cf) -> std::optional<ApiError> {
    auto fn = c.is_object() ? c.find("function") : c.end();
    if (fn == c.end() || !fn->is_object())
      return bad_request(fmt::format("'{}.function' is required", cf), cf, "missing_field");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string())
      return bad_request(fmt::format("'{}.function.name' is required", cf), cf, "missing_field");
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    if (auto a = fn->find("arguments"); a != fn->end() && a->is_string()) {
      auto parsed = parse_ordered_json(a->get_ref<const std::string&>());
      if (!parsed || !parsed->is_object())
        return bad_request(fmt::format("'{}.function.arguments' must be a JSON object's text{}", cf,
                                       parsed ? "" : ": " + parsed.message()),
                           cf, "invalid_value");
      args = std::move(parsed).value();
    } else if (a != fn->end() && !a->is_null()) {
      return wrong_type(cf + ".function.arguments", "a string", *a);
    }
    nlohmann::ordered_json call;
    if (auto id = c.find("id"); id != c.end() && id->is_string()) call["id"] = *id;
    call["type"] = "function";
    call["function"] = {{"name", *name}, {"arguments", args}};
    out.push_back(std::move(call));
    return std::nullopt;
  };
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return std::nullopt;
  if (auto e = for_each_element(m, "tool_calls", field + ".tool_calls", each)) return e;
  msg.tool_calls = std::move(out);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_function_tools(const json& j, json& tools) {
  json out = json::array();
  auto each = [&](const json& t, const std::string& field) -> std::optional<ApiError> {
    if (!t.is_object()) return wrong_type(field, "an object", t);
    auto type = t.find("type");
    if (type == t.end() || *type != "function")
      return bad_request(fmt::format("'{}.type' must be \"function\"", field), field + ".type",
                         "invalid_value");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object())
      return bad_request(fmt::format("'{}.function' is required and must be an object", field),
                         field + ".function", "missing_field");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad_request(fmt::format("'{}.function.name' is required", field),
                         field + ".function.name", "missing_field");
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
      return wrong_type(field + ".function.parameters", "a JSON Schema object", *p);
    out.push_back(t);
    return std::nullopt;
  };
  if (auto e = for_each_element(j, "tools", "tools", each)) return e;
  tools = std::move(out);
  return std::nullopt;
}

std::variant<std::optional<OutputFormat>, ApiError> parse_output_format(const json& format,
                                                                        const std::string& field,
                                                                        bool nested) {
  if (!format.is_object()) return wrong_type(field, "an object", format);
  auto t = format.find("type");
  if (t == format.end() || !t->is_string())
    return bad_request(fmt::format("'{}.type' is required", field), field + ".type",
                       "missing_field");
  const std::string& type = t->get_ref<const std::string&>();
  if (type == "text") return std::optional<OutputFormat>();
  OutputFormat out;
  if (type == "json_object") {
    out.any_object = true;
    return std::optional<OutputFormat>(std::move(out));
  }
  if (type != "json_schema")
    return bad_request(
        fmt::format("'{}.type' must be \"text\", \"json_object\" or \"json_schema\"", field),
        field + ".type", "invalid_value");
  const json* body = &format;
  std::string where = field;
  if (nested) {
    auto inner = format.find("json_schema");
    where = field + ".json_schema";
    if (inner == format.end() || !inner->is_object())
      return bad_request(fmt::format("'{}' is required and must be an object", where), where,
                         "missing_field");
    body = &*inner;
  }
  auto name = body->find("name");
  if (name != body->end() && !name->is_null()) {
    if (!name->is_string()) return wrong_type(where + ".name", "a string", *name);
    out.name = name->get<std::string>();
  }
  if (auto strict = body->find("strict"); strict != body->end() && !strict->is_null()) {
    if (!strict->is_boolean()) return wrong_type(where + ".strict", "a boolean", *strict);
    out.strict = strict->get<bool>();
  }
  auto schema = body->find("schema");
  if (schema == body->end() || schema->is_null()) {
    out.schema = json::object();  // OpenAI: no schema means any JSON value
  } else if (!schema->is_object() && !schema->is_boolean()) {
    return wrong_type(where + ".schema", "a JSON Schema object", *schema);
  } else {
    out.schema = *schema;
  }
  return std::optional<OutputFormat>(std::move(out));
}

std::variant<ToolChoice, ApiError> parse_tool_choice(const json& choice, bool& none_chosen) {
  none_chosen = false;
  ToolChoice out;
  if (choice.is_string()) {
    const std::string& c = choice.get_ref<const std::string&>();
    if (c == "none" || c == "auto") {
      none_chosen = c == "none";
      return out;
    }
    if (c == "required") {
      out.mode = ToolChoice::Mode::Required;
      return out;
    }
  } else if (choice.is_object() && choice.value("type", json()) == "function") {
    // Chat nests the name ({"function": {"name"}}); the Responses API does not ({"name"}).
    auto fn = choice.find("function");
    const json& holder = fn != choice.end() && fn->is_object() ? *fn : choice;
    auto name = holder.find("name");
    if (name != holder.end() && name->is_string() && !name->get_ref<const std::string&>().empty()) {
      out.mode = ToolChoice::Mode::Named;
      out.name = name->get<std::string>();
      return out;
    }
  }
  return bad_request(
      "'tool_choice' must be \"none\", \"auto\", \"required\" or a named function "
      "({\"type\": \"function\", \"function\": {\"name\": ...}})",
      "tool_choice", "invalid_value");
}

std::optional<ApiError> read_session_id(const json& j, std::string& out) {
  if (auto e = read_string(j, "session_id", out)) return e;
  if (!out.empty() && !valid_session_id(out))
    return bad_request("'session_id' must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                       "session_id", "invalid_session_id");
  return std::nullopt;
}

bool valid_session_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
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
  if (auto e = read_tools(j, r)) return *e;
  auto array = message_array(j);
  if (auto* e = std::get_if<ApiError>(&array)) return *e;
  const json* msgs = std::get<const json*>(array);
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(field, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad_request(fmt::format("'{}.role' is required and must be a string", field),
                         field + ".role", "missing_field");
    std::string r_name = role->get<std::string>();
    if (r_name == "developer") r_name = "system";  // OpenAI's newer name for the system role
    if (r_name != "system" && r_name != "user" && r_name != "assistant" && r_name != "tool")
      return bad_request(
          fmt::format("'{}.role' must be system, developer, user, assistant or tool; got '{}'",
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
    if (msg.role == "assistant")
      if (auto e = read_tool_calls(m, field, msg)) return *e;
    if (auto id = m.find("tool_call_id"); msg.role == "tool" && id != m.end() && !id->is_null()) {
      if (!id->is_string()) return wrong_type(field + ".tool_call_id", "a string", *id);
      msg.tool_call_id = id->get<std::string>();
    }
    r.messages.push_back(std::move(msg));
  }
  bool any_user = false;
  for (const ChatMessage& m : r.messages) any_user = any_user || m.role == "user";
  if (!any_user)
    return bad_request("'messages' must hold at least one user message", "messages",
                       "empty_messages");
  return r;
}

std::variant<CompletionRequest, ApiError> parse_completion_request(
    const std::string& body, const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  CompletionRequest r;
  if (auto e = read_generation(j, defaults, /*chat=*/false, r.gen)) return *e;
  if (r.gen.params.max_tokens == 0 && !j.contains("max_tokens"))
    r.gen.params.max_tokens = 16;  // OpenAI's default
  if (auto e = read_bool(j, "echo", r.echo)) return e.value();
  if (r.echo && r.gen.top_logprobs >= 0)
    return bad_request(
        "'echo' with 'logprobs' would return the prompt's log-probabilities, which this server "
        "does "
        "not compute; ask for one or the other",
        "echo", "unsupported_parameter");
  auto p = j.find("prompt");
  if (p == j.end() || p->is_null())
    return bad_request("'prompt' is required", "prompt", "missing_field");
  if (p->is_string()) {
    if (p->get_ref<const std::string&>().empty())
      return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
    r.prompt = p->get<std::string>();
  } else if (p->is_array()) {
    if (p->empty()) return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
    if ((*p)[0].is_string()) {
      if (p->size() != 1)
        return bad_request("only one prompt per request is supported (send a string)", "prompt",
                           "unsupported_value");
      if ((*p)[0].get_ref<const std::string&>().empty())
        return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
      r.prompt = (*p)[0].get<std::string>();
    } else {
      for (const json& t : *p)
        if (t.is_array())
          return bad_request("only one prompt per request is supported", "prompt",
                             "unsupported_value");
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

std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(const std::string& body,
                                                                   int32_t vocab_size) {
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
