#include "server/responses_request.h"

#include <limits>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace tangram::server {
namespace {

using nlohmann::json;

bool present(const json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && !it->is_null();
}

ApiError unsupported(const std::string& field, const std::string& why) {
  return bad_request(fmt::format("'{}' {}", field, why), field, "unsupported_parameter");
}

// Fields that change what a response is: refused unless they ask for what Tangram does anyway.
std::optional<ApiError> refuse_unsupported(const json& j) {
  if (auto it = j.find("include"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return wrong_type("include", "an array", *it);
    for (const json& item : *it)
      if (!item.is_string() || item.get<std::string>() != kIncludeLogprobs)
        return unsupported("include",
                           fmt::format("may only hold \"{}\" on this server", kIncludeLogprobs));
  }
  if (auto it = j.find("reasoning");
      it != j.end() && !it->is_null() && !(it->is_object() && it->empty()))
    return unsupported("reasoning",
                       "is not supported by this server (the model has no reasoning settings)");
  if (auto it = j.find("background");
      it != j.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
    return unsupported("background", "is not supported: responses run while the request is open");
  for (const char* f : {"prompt", "conversation", "max_tool_calls"})
    if (present(j, f))
      return unsupported(f, std::string(f) == "conversation"
                                ? "is not supported: chain turns with 'previous_response_id'"
                                : "is not supported by this server");
  return std::nullopt;
}

// tools: [{"type": "function", "name", "description"?, "parameters"?}], turned into the chat form
// the templates take ({"type": "function", "function": {...}}). Built-in tools (web search, file
// search, ...) are refused.
std::optional<ApiError> read_tools(const json& j, json& out) {
  auto each = [&](const json& t, const std::string& field) -> std::optional<ApiError> {
    if (!t.is_object()) return wrong_type(field, "an object", t);
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || *type != "function")
      return bad_request(fmt::format("'{}': only function tools are supported", field),
                         field + ".type", "unsupported_value");
    auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad_request(fmt::format("'{}.name' is required", field), field + ".name",
                         "missing_field");
    json fn = {{"name", *name}};
    if (auto d = t.find("description"); d != t.end() && d->is_string()) fn["description"] = *d;
    if (auto p = t.find("parameters"); p != t.end() && !p->is_null()) {
      if (!p->is_object()) return wrong_type(field + ".parameters", "a JSON Schema object", *p);
      fn["parameters"] = *p;
    }
    out.push_back(json{{"type", "function"}, {"function", std::move(fn)}});
    return std::nullopt;
  };
  return for_each_element(j, "tools", "tools", each);
}

// tool_choice (after tools): "none" hides the tools; "required" or a named one needs tools.
std::optional<ApiError> read_tool_choice(const json& j, ResponsesRequest& r) {
  auto c = j.find("tool_choice");
  if (c == j.end() || c->is_null()) return std::nullopt;
  bool none = false;
  auto parsed = parse_tool_choice(*c, none);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  r.tool_choice = std::get<ToolChoice>(parsed);
  if (none) r.tools = json::array();
  if (r.tool_choice.mode != ToolChoice::Mode::Auto && r.tools.empty())
    return bad_request("'tool_choice' asks for a tool call but 'tools' is empty", "tool_choice",
                       "invalid_value");
  return std::nullopt;
}

// text: {"format": {"type": "text" | "json_object" | "json_schema", "name", "schema", "strict"}}.
std::optional<ApiError> read_text_format(const json& j, ResponsesRequest& r) {
  auto it = j.find("text");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("text", "an object", *it);
  auto f = it->find("format");
  if (f == it->end() || f->is_null()) return std::nullopt;
  auto format = parse_output_format(*f, "text.format", /*nested=*/false);
  if (auto* e = std::get_if<ApiError>(&format)) return *e;
  r.gen.format = std::move(std::get<std::optional<OutputFormat>>(format));
  if (r.gen.format) r.text_format = *f;
  return std::nullopt;
}

std::optional<ApiError> required_string(const json& item, const std::string& field, const char* key,
                                        std::string& out) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string())
    return bad_request(fmt::format("'{}.{}' is required and must be a string", field, key),
                       field + "." + key, "missing_field");
  out = it->get<std::string>();
  return std::nullopt;
}

// A function_call item the client sends back: the assistant's call, as the templates take it
// (arguments as an object). Consecutive calls join one assistant message (parallel calls).
std::optional<ApiError> read_function_call(const json& item, const std::string& field,
                                           std::vector<ChatMessage>& out) {
  std::string call_id, name, arguments;
  if (auto e = required_string(item, field, "call_id", call_id)) return e;
  if (auto e = required_string(item, field, "name", name)) return e;
  if (auto e = required_string(item, field, "arguments", arguments)) return e;
  auto args = parse_ordered_json(arguments);
  if (!args || !args->is_object())
    return bad_request(fmt::format("'{}.arguments' must be a JSON object's text{}", field,
                                   args ? "" : ": " + args.message()),
                       field + ".arguments", "invalid_value");
  nlohmann::ordered_json call = {
      {"id", call_id},
      {"type", "function"},
      {"function", {{"name", name}, {"arguments", std::move(args).value()}}}};
  if (out.empty() || out.back().role != "assistant" || !out.back().tool_calls) {
    ChatMessage m;
    m.role = "assistant";
    m.tool_calls = nlohmann::ordered_json::array();
    out.push_back(std::move(m));
  }
  out.back().tool_calls->push_back(std::move(call));
  return std::nullopt;
}

// A function_call_output item: the result of a call, as a tool message.
std::optional<ApiError> read_function_output(const json& item, const std::string& field,
                                             std::vector<ChatMessage>& out) {
  ChatMessage m;
  m.role = "tool";
  std::string call_id;
  if (auto e = required_string(item, field, "call_id", call_id)) return e;
  if (auto e = required_string(item, field, "output", m.content)) return e;
  m.tool_call_id = std::move(call_id);
  out.push_back(std::move(m));
  return std::nullopt;
}

// One input item's text: a string, or parts of type input_text / output_text.
std::variant<std::string, ApiError> read_item_text(const json& item, const std::string& field) {
  auto c = item.find("content");
  if (c == item.end() || c->is_null())
    return bad_request(fmt::format("'{}.content' is missing", field), field + ".content",
                       "missing_field");
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array())
    return wrong_type(field + ".content", "a string or an array of content parts", *c);
  std::string text;
  for (size_t k = 0; k < c->size(); ++k) {
    const json& part = (*c)[k];
    const std::string pf = fmt::format("{}.content[{}]", field, k);
    if (!part.is_object()) return wrong_type(pf, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return bad_request(fmt::format("'{}' needs a string 'type'", pf), pf + ".type",
                         "missing_field");
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text" && t != "text")
      return bad_request(fmt::format("'{}': only text parts are supported, got a '{}' part", pf, t),
                         pf, "unsupported_value");
    auto tx = part.find("text");
    if (tx == part.end() || !tx->is_string())
      return bad_request(fmt::format("'{}' needs a string 'text'", pf), pf + ".text",
                         "missing_field");
    text += tx->get<std::string>();
  }
  return text;
}

std::variant<ChatMessage, ApiError> read_input_item(const json& item, size_t index) {
  const std::string field = fmt::format("input[{}]", index);
  if (!item.is_object()) return wrong_type(field, "an object", item);
  if (auto t = item.find("type"); t != item.end() && !t->is_null()) {
    if (!t->is_string()) return wrong_type(field + ".type", "a string", *t);
    if (t->get<std::string>() != "message")
      return bad_request(fmt::format("'{}': only message, function_call and function_call_output "
                                     "items are supported, got a '{}' item",
                                     field, t->get<std::string>()),
                         field + ".type", "unsupported_value");
  }
  auto role = item.find("role");
  if (role == item.end() || !role->is_string())
    return bad_request(fmt::format("'{}.role' is required and must be a string", field),
                       field + ".role", "missing_field");
  std::string r = role->get<std::string>();
  if (r == "developer") r = "system";
  if (r != "system" && r != "user" && r != "assistant")
    return bad_request(
        fmt::format("'{}.role' must be user, assistant, system or developer; got '{}'", field,
                    role->get<std::string>()),
        field + ".role", "invalid_value");
  auto text = read_item_text(item, field);
  if (auto* e = std::get_if<ApiError>(&text)) return *e;
  ChatMessage m;
  m.role = std::move(r);
  m.content = std::move(std::get<std::string>(text));
  return m;
}

std::optional<ApiError> read_input(const json& j, std::vector<ChatMessage>& out) {
  auto in = j.find("input");
  if (in == j.end() || in->is_null())
    return bad_request("'input' is required", "input", "missing_field");
  if (in->is_string()) {
    ChatMessage m;
    m.role = "user";
    m.content = in->get<std::string>();
    out.push_back(std::move(m));
    return std::nullopt;
  }
  if (!in->is_array()) return wrong_type("input", "a string or an array of input items", *in);
  if (in->empty())
    return bad_request("'input' must hold at least one item", "input", "empty_input");
  for (size_t i = 0; i < in->size(); ++i) {
    const json& item = (*in)[i];
    const std::string field = fmt::format("input[{}]", i);
    const std::string type = item.is_object() && item.contains("type") && item["type"].is_string()
                                 ? item["type"].get<std::string>()
                                 : "message";
    if (type == "function_call") {
      if (auto e = read_function_call(item, field, out)) return e;
      continue;
    }
    if (type == "function_call_output") {
      if (auto e = read_function_output(item, field, out)) return e;
      continue;
    }
    auto m = read_input_item(item, i);
    if (auto* e = std::get_if<ApiError>(&m)) return *e;
    out.push_back(std::move(std::get<ChatMessage>(m)));
  }
  return std::nullopt;
}

std::optional<ApiError> read_metadata(const json& j, json& out) {
  auto it = j.find("metadata");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("metadata", "an object", *it);
  if (it->size() > 16)
    return bad_request("'metadata' holds at most 16 keys", "metadata", "out_of_range");
  for (const auto& [k, v] : it->items()) {
    if (k.size() > 64)
      return bad_request("'metadata' keys are at most 64 characters", "metadata", "out_of_range");
    if (!v.is_string() || v.get_ref<const std::string&>().size() > 512)
      return bad_request("'metadata' values must be strings of at most 512 characters", "metadata",
                         "out_of_range");
  }
  out = *it;
  return std::nullopt;
}

std::optional<ApiError> read_fields(const json& j, const RequestDefaults& defaults,
                                    ResponsesRequest& r) {
  r.gen.params = defaults.params;
  if (auto e = refuse_unsupported(j)) return e;
  if (auto e = read_string(j, "model", r.gen.model)) return e;
  int64_t max_tokens = 0;
  if (auto e = read_int(j, "max_output_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens))
    return e;
  if (max_tokens > 0) r.max_output_tokens = max_tokens;
  r.gen.params.max_tokens = static_cast<int>(max_tokens);
  if (auto e = read_sampling(j, r.gen.params)) return e;
  if (auto e = read_bool(j, "stream", r.gen.stream)) return e;
  if (auto e = read_bool(j, "store", r.store)) return e;
  if (auto it = j.find("truncation"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "auto" && *it != "disabled"))
      return bad_request("'truncation' must be \"auto\" or \"disabled\"", "truncation",
                         "invalid_value");
    r.truncate = *it == "auto";
  }
  if (auto e = read_string(j, "instructions", r.instructions)) return e;
  if (auto e = read_string(j, "previous_response_id", r.previous_response_id)) return e;
  if (!r.previous_response_id.empty() && !valid_response_id(r.previous_response_id))
    return ApiError{404,
                    fmt::format("no stored response '{}' for this API key", r.previous_response_id),
                    "invalid_request_error",
                    "previous_response_id",
                    "response_not_found",
                    0};
  if (auto e = read_session_id(j, r.gen.session_id)) return e;
  if (auto e = read_metadata(j, r.metadata)) return e;
  if (auto e = read_tools(j, r.tools)) return e;
  if (auto e = read_tool_choice(j, r)) return e;
  if (auto e = read_text_format(j, r)) return e;
  if (auto e = read_bool(j, "parallel_tool_calls", r.parallel_tool_calls)) return e;
  // Log-probabilities: asked for by include (OpenAI's way) or by top_logprobs > 0.
  int64_t top = 0;
  if (auto e = read_int(j, "top_logprobs", 0, 20, top)) return e;
  r.top_logprobs = static_cast<int>(top);
  const auto include = j.find("include");
  const bool included = include != j.end() && include->is_array() && !include->empty();
  if (included || top > 0) r.gen.top_logprobs = r.top_logprobs;
  if (Status st = r.gen.params.validate(); !st.ok()) return bad_request(st.message());
  return std::nullopt;
}

}  // namespace

bool valid_response_id(const std::string& id) {
  constexpr std::string_view prefix = "resp_";
  if (id.size() <= prefix.size() || id.size() > prefix.size() + 64 ||
      id.compare(0, prefix.size(), prefix) != 0)
    return false;
  for (size_t i = prefix.size(); i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::variant<ResponsesRequest, ApiError> parse_responses_request(const std::string& body,
                                                                 const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  ResponsesRequest r;
  if (auto e = read_fields(j, defaults, r)) return *e;
  if (auto e = read_input(j, r.input)) return *e;
  bool any_user = false;  // a user message, or a tool result to answer
  for (const ChatMessage& m : r.input) any_user = any_user || m.role == "user" || m.role == "tool";
  if (!any_user && r.previous_response_id.empty())
    return bad_request("'input' must hold at least one user message", "input", "empty_input");
  return r;
}

}  // namespace tangram::server
