#include "server/anthropic_request.h"

#include <limits>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace tangram::server {
namespace {

using nlohmann::json;

ApiError unsupported(const std::string& what, const std::string& field) {
  return bad_request(fmt::format("{} not supported by this server", what), field,
                     "unsupported_parameter");
}

// A block's "text", which must be a string.
std::variant<std::string, ApiError> block_text(const json& block, const std::string& field) {
  auto t = block.find("text");
  if (t == block.end() || !t->is_string())
    return bad_request(fmt::format("'{}.text' is required and must be a string", field),
                       field + ".text", "missing_field");
  return t->get<std::string>();
}

// system: a string or an array of text blocks.
std::variant<std::string, ApiError> read_system(const json& system) {
  if (system.is_string()) return system.get<std::string>();
  if (!system.is_array())
    return wrong_type("system", "a string or an array of text blocks", system);
  std::string text;
  for (size_t i = 0; i < system.size(); ++i) {
    const std::string field = fmt::format("system[{}]", i);
    const json& b = system[i];
    if (!b.is_object() || b.value("type", json()) != "text")
      return bad_request(
          fmt::format("'{}' must be a text block ({{\"type\": \"text\", ...}})", field), field,
          "invalid_value");
    auto t = block_text(b, field);
    if (auto* e = std::get_if<ApiError>(&t)) return *e;
    if (!text.empty()) text += "\n\n";
    text += std::get<std::string>(t);
  }
  return text;
}

// A tool_result's content: a string or text blocks.
std::variant<std::string, ApiError> tool_result_text(const json& block, const std::string& field) {
  auto c = block.find("content");
  if (c == block.end() || c->is_null()) return std::string();
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array())
    return wrong_type(field + ".content", "a string or an array of text blocks", *c);
  std::string text;
  for (size_t k = 0; k < c->size(); ++k) {
    const std::string f = fmt::format("{}.content[{}]", field, k);
    const json& b = (*c)[k];
    if (!b.is_object() || b.value("type", json()) != "text")
      return unsupported(fmt::format("'{}': only text blocks in a tool result are", f), f);
    auto t = block_text(b, f);
    if (auto* e = std::get_if<ApiError>(&t)) return *e;
    text += std::get<std::string>(t);
  }
  return text;
}

// One message of "messages": its text, its tool_use blocks (assistant) or its tool_result blocks
// (user), appended to `out` as the template's messages.
std::optional<ApiError> read_message(const json& m, size_t index, std::vector<ChatMessage>& out) {
  const std::string field = fmt::format("messages[{}]", index);
  if (!m.is_object()) return wrong_type(field, "an object", m);
  auto role = m.find("role");
  if (role == m.end() || !role->is_string() || (*role != "user" && *role != "assistant"))
    return bad_request(fmt::format("'{}.role' must be \"user\" or \"assistant\"", field),
                       field + ".role", "invalid_value");
  ChatMessage msg;
  msg.role = role->get<std::string>();
  auto content = m.find("content");
  if (content == m.end() || content->is_null())
    return bad_request(fmt::format("'{}.content' is required", field), field + ".content",
                       "missing_field");
  if (content->is_string()) {
    msg.content = content->get<std::string>();
    out.push_back(std::move(msg));
    return std::nullopt;
  }
  if (!content->is_array())
    return wrong_type(field + ".content", "a string or an array of content blocks", *content);
  std::vector<ChatMessage> results;  // tool results come before the user's text
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (size_t k = 0; k < content->size(); ++k) {
    const std::string bf = fmt::format("{}.content[{}]", field, k);
    const json& b = (*content)[k];
    if (!b.is_object()) return wrong_type(bf, "an object", b);
    auto type_it = b.find("type");
    if (type_it == b.end() || !type_it->is_string())
      return bad_request(fmt::format("'{}.type' is required", bf), bf + ".type", "missing_field");
    const std::string type = type_it->get<std::string>();
    if (type == "text") {
      auto t = block_text(b, bf);
      if (auto* e = std::get_if<ApiError>(&t)) return *e;
      msg.content += std::get<std::string>(t);
    } else if (type == "tool_use" && msg.role == "assistant") {
      auto id = b.find("id");
      auto name = b.find("name");
      if (id == b.end() || !id->is_string() || name == b.end() || !name->is_string())
        return bad_request(fmt::format("'{}' needs a string 'id' and 'name'", bf), bf,
                           "missing_field");
      auto input = b.find("input");
      if (input != b.end() && !input->is_null() && !input->is_object())
        return wrong_type(bf + ".input", "an object", *input);
      nlohmann::ordered_json call;
      call["id"] = *id;
      call["type"] = "function";
      call["function"] = {
          {"name", *name},
          {"arguments", input == b.end() || input->is_null() ? nlohmann::ordered_json::object()
                                                             : nlohmann::ordered_json(*input)}};
      calls.push_back(std::move(call));
    } else if (type == "tool_result" && msg.role == "user") {
      auto id = b.find("tool_use_id");
      if (id == b.end() || !id->is_string())
        return bad_request(fmt::format("'{}.tool_use_id' is required", bf), bf + ".tool_use_id",
                           "missing_field");
      auto text = tool_result_text(b, bf);
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      ChatMessage result;
      result.role = "tool";
      result.tool_call_id = id->get<std::string>();
      result.content = std::move(std::get<std::string>(text));
      if (b.value("is_error", false)) result.content = "Error: " + result.content;
      results.push_back(std::move(result));
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier turns' thinking, sent back by clients that keep it: not part of the prompt.
    } else {
      return unsupported(fmt::format("'{}': a '{}' block in a {} message is", bf, type, msg.role),
                         bf + ".type");
    }
  }
  for (ChatMessage& r : results) out.push_back(std::move(r));
  if (!calls.empty()) msg.tool_calls = std::move(calls);
  // A user message of tool results only adds nothing more.
  if (msg.role == "assistant" || !msg.content.empty() || results.empty())
    out.push_back(std::move(msg));
  return std::nullopt;
}

// tools: [{"name", "description"?, "input_schema"}] into chat's function tools. Server tools
// (web search, code execution: a "type" other than "custom") run nothing here: refused.
std::optional<ApiError> read_tools(const json& j, MessagesRequest& r) {
  auto each = [&](const json& t, const std::string& field) -> std::optional<ApiError> {
    if (!t.is_object()) return wrong_type(field, "an object", t);
    if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom")
      return unsupported(fmt::format("the server tool '{}' is", type->dump()), field + ".type");
    auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad_request(fmt::format("'{}.name' is required", field), field + ".name",
                         "missing_field");
    json fn = {{"name", *name}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
      if (!d->is_string()) return wrong_type(field + ".description", "a string", *d);
      fn["description"] = *d;
    }
    auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object())
      return bad_request(
          fmt::format("'{}.input_schema' is required and must be a JSON Schema object", field),
          field + ".input_schema", "missing_field");
    fn["parameters"] = *schema;
    r.tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    return std::nullopt;
  };
  return for_each_element(j, "tools", "tools", each);
}

// tool_choice: {"type": "auto" | "any" | "tool" | "none", "name"?, "disable_parallel_tool_use"?}.
std::optional<ApiError> read_tool_choice(const json& j, MessagesRequest& r) {
  auto choice = j.find("tool_choice");
  if (choice == j.end() || choice->is_null()) return std::nullopt;
  if (!choice->is_object()) return wrong_type("tool_choice", "an object", *choice);
  const json type = choice->value("type", json());
  if (type == "none") {
    r.tools = json::array();  // the model is not told of them
    return std::nullopt;
  }
  bool one_call = false;
  if (auto e = read_bool(*choice, "disable_parallel_tool_use", one_call)) return e;
  r.parallel_tool_calls = !one_call;
  if (type == "any") {
    r.tool_choice.mode = ToolChoice::Mode::Required;
  } else if (type == "tool") {
    auto name = choice->find("name");
    if (name == choice->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad_request("'tool_choice.name' is required with \"type\": \"tool\"",
                         "tool_choice.name", "missing_field");
    r.tool_choice.mode = ToolChoice::Mode::Named;
    r.tool_choice.name = name->get<std::string>();
  } else if (type != "auto") {
    return bad_request("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\"",
                       "tool_choice.type", "invalid_value");
  }
  if (r.tool_choice.mode != ToolChoice::Mode::Auto && r.tools.empty())
    return bad_request("'tool_choice' asks for a tool call but 'tools' is empty", "tool_choice",
                       "invalid_value");
  return std::nullopt;
}

std::optional<ApiError> read_stop_sequences(const json& j, SamplingParams& p) {
  auto it = j.find("stop_sequences");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return wrong_type("stop_sequences", "an array of strings", *it);
  if (it->size() > kMaxStopSequences)
    return bad_request(fmt::format("'stop_sequences' holds at most {} strings", kMaxStopSequences),
                       "stop_sequences", "out_of_range");
  p.stop.clear();
  for (const json& s : *it) {
    if (!s.is_string()) return wrong_type("stop_sequences[]", "a string", s);
    if (s.get_ref<const std::string&>().empty())
      return bad_request("'stop_sequences' strings must not be empty", "stop_sequences",
                         "out_of_range");
    p.stop.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_generation(const json& j, const RequestDefaults& defaults,
                                        bool count_only, GenerationFields& g) {
  g.params = defaults.params;
  if (auto thinking = j.find("thinking");
      thinking != j.end() && thinking->is_object() && thinking->value("type", json()) == "enabled")
    return unsupported("extended thinking ('thinking': {\"type\": \"enabled\"}) is", "thinking");
  for (const char* f : {"mcp_servers", "container"})
    if (auto it = j.find(f); it != j.end() && !it->is_null())
      return unsupported(fmt::format("'{}' is", f), f);
  auto model = j.find("model");
  if (model == j.end() || !model->is_string())
    return bad_request("'model' is required and must be a string", "model", "missing_field");
  g.model = model->get<std::string>();
  if (!count_only) {
    if (!j.contains("max_tokens"))
      return bad_request("'max_tokens' is required", "max_tokens", "missing_field");
    int64_t max_tokens = 0;
    if (auto e = read_int(j, "max_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens))
      return e;
    g.params.max_tokens = static_cast<int>(max_tokens);
  }
  if (auto e = read_number(j, "temperature", 0, 1, g.params.temperature)) return e;
  if (auto e = read_number(j, "top_p", 0, 1, g.params.top_p)) return e;
  if (j.contains("top_p") && !(g.params.top_p > 0.0f))
    return bad_request("'top_p' must be in (0, 1]; 0 would keep no token", "top_p", "out_of_range");
  int64_t top_k = g.params.top_k;
  if (auto e = read_int(j, "top_k", 0, 1'000'000, top_k)) return e;
  g.params.top_k = static_cast<int>(top_k);
  if (auto e = read_stop_sequences(j, g.params)) return e;
  if (auto e = read_bool(j, "stream", g.stream)) return e;
  if (auto e = read_session_id(j, g.session_id)) return e;
  if (Status st = g.params.validate(); !st.ok()) return bad_request(st.message());
  return std::nullopt;
}

}  // namespace

std::variant<MessagesRequest, ApiError> parse_messages_request(const std::string& body,
                                                               const RequestDefaults& defaults,
                                                               bool count_only) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  MessagesRequest r;
  if (auto e = read_generation(j, defaults, count_only, r.gen)) return *e;
  if (auto e = read_tools(j, r)) return *e;
  if (auto e = read_tool_choice(j, r)) return *e;
  if (auto system = j.find("system"); system != j.end() && !system->is_null()) {
    auto text = read_system(*system);
    if (auto* e = std::get_if<ApiError>(&text)) return *e;
    ChatMessage prompt;
    prompt.role = "system";
    prompt.content = std::move(std::get<std::string>(text));
    r.messages.push_back(std::move(prompt));
  }
  auto array = message_array(j);
  if (auto* e = std::get_if<ApiError>(&array)) return *e;
  const json* msgs = std::get<const json*>(array);
  for (size_t i = 0; i < msgs->size(); ++i)
    if (auto e = read_message((*msgs)[i], i, r.messages)) return *e;
  if (msgs->front().value("role", json()) != "user")
    return bad_request("the first message must be a user message", "messages[0].role",
                       "invalid_value");
  // A last assistant message asks the model to continue it (a prefill); the chat template closes
  // every assistant turn it renders, so it cannot be continued faithfully: refused, not guessed.
  if (!count_only && msgs->back().value("role", json()) == "assistant")
    return bad_request(
        "a last assistant message (a prefill for the model to continue) is not supported by this "
        "server; end 'messages' with a user message",
        fmt::format("messages[{}]", msgs->size() - 1), "unsupported_parameter");
  return r;
}

}  // namespace tangram::server
