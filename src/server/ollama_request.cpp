#include "server/ollama_request.h"

#include <limits>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace tangram::server {
namespace {

using nlohmann::json;

ApiError unsupported(const std::string& message, const std::string& field) {
  return bad_request(message, field, "unsupported_parameter");
}

// "options": Ollama's names for the sampling settings.
std::optional<ApiError> read_options(const json& j, SamplingParams& p) {
  auto it = j.find("options");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("options", "an object", *it);
  const json& o = *it;
  if (auto e = read_number(o, "temperature", 0, 100, p.temperature)) return e;
  if (auto e = read_number(o, "top_p", 0, 1, p.top_p)) return e;
  if (o.contains("top_p") && !(p.top_p > 0.0f))
    return bad_request("'options.top_p' must be in (0, 1]", "options.top_p", "out_of_range");
  if (auto e = read_number(o, "min_p", 0, 1, p.min_p)) return e;
  int64_t top_k = p.top_k;
  if (auto e = read_int(o, "top_k", 0, 1'000'000, top_k)) return e;
  p.top_k = static_cast<int>(top_k);
  if (auto e = read_number(o, "repeat_penalty", 0, 10, p.repetition_penalty)) return e;
  if (o.contains("repeat_penalty") && !(p.repetition_penalty > 0.0f))
    return bad_request("'options.repeat_penalty' must be > 0 (1 = off)", "options.repeat_penalty",
                       "out_of_range");
  int64_t last_n = p.penalty_last_n;
  if (auto e = read_int(o, "repeat_last_n", -1, 1'000'000, last_n)) return e;
  p.penalty_last_n = static_cast<int>(last_n);
  if (auto e = read_number(o, "presence_penalty", -2, 2, p.presence_penalty)) return e;
  if (auto e = read_number(o, "frequency_penalty", -2, 2, p.frequency_penalty)) return e;
  // num_predict: tokens to generate; -1 (Ollama's default) and -2 mean up to the context.
  int64_t predict = -1;
  if (auto e = read_int(o, "num_predict", -2, std::numeric_limits<int32_t>::max(), predict))
    return e;
  p.max_tokens = predict > 0 ? static_cast<int>(predict) : 0;
  if (predict == 0)
    return bad_request("'options.num_predict' 0 would generate nothing", "options.num_predict",
                       "out_of_range");
  if (auto s = o.find("seed"); s != o.end() && !s->is_null()) {
    if (!s->is_number_integer()) return wrong_type("options.seed", "an integer", *s);
    p.seed =
        s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
    p.seed_set = true;
  }
  if (auto s = o.find("stop"); s != o.end() && !s->is_null()) {
    if (!s->is_array()) return wrong_type("options.stop", "an array of strings", *s);
    p.stop.clear();
    for (const json& x : *s) {
      if (!x.is_string() || x.get_ref<const std::string&>().empty())
        return bad_request("'options.stop' must hold non-empty strings", "options.stop",
                           "invalid_value");
      p.stop.push_back(x.get<std::string>());
    }
  }
  if (auto m = o.find("mirostat"); m != o.end() && m->is_number() && m->get<double>() != 0)
    return unsupported("'options.mirostat' sampling is not supported by this server; leave it 0",
                       "options.mirostat");
  if (auto t = o.find("typical_p"); t != o.end() && t->is_number() && t->get<double>() < 1)
    return unsupported("'options.typical_p' sampling is not supported by this server; leave it 1",
                       "options.typical_p");
  return std::nullopt;
}

// "format": "json" (any JSON object) or a JSON Schema object.
std::optional<ApiError> read_format(const json& j, GenerationFields& g) {
  auto it = j.find("format");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    if (it->get_ref<const std::string&>().empty()) return std::nullopt;
    if (*it != "json")
      return bad_request("'format' must be \"json\" or a JSON Schema object", "format",
                         "invalid_value");
    OutputFormat any;
    any.any_object = true;
    g.format = std::move(any);
    return std::nullopt;
  }
  if (!it->is_object()) return wrong_type("format", "\"json\" or a JSON Schema object", *it);
  OutputFormat f;
  f.schema = *it;
  f.strict = true;
  g.format = std::move(f);
  return std::nullopt;
}

std::optional<ApiError> read_common(const json& j, const RequestDefaults& defaults,
                                    GenerationFields& g) {
  g.params = defaults.params;
  auto model = j.find("model");
  if (model == j.end() || !model->is_string() || model->get_ref<const std::string&>().empty())
    return bad_request("'model' is required", "model", "missing_field");
  g.model = model->get<std::string>();
  g.stream = true;  // Ollama streams unless told not to
  if (auto e = read_bool(j, "stream", g.stream)) return e;
  if (auto e = read_options(j, g.params)) return e;
  if (auto e = read_format(j, g)) return e;
  if (auto t = j.find("think"); t != j.end() && !t->is_null() && *t != false)
    return unsupported("this model does not think: 'think' is not supported", "think");
  if (auto e = read_session_id(j, g.session_id)) return e;
  if (Status st = g.params.validate(); !st.ok()) return bad_request(st.message());
  return std::nullopt;
}

std::optional<ApiError> refuse_images(const json& holder, const std::string& field) {
  if (auto im = holder.find("images"); im != holder.end() && im->is_array() && !im->empty())
    return unsupported("images are not supported by this server (the model reads text only)",
                       field.empty() ? std::string("images") : field + ".images");
  return std::nullopt;
}

// tool_calls: [{"function": {"name", "arguments": {...}}}]: arguments are an object already.
std::optional<ApiError> read_tool_calls(const json& m, const std::string& field, ChatMessage& msg) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  auto each = [&](const json& c, const std::string& cf) -> std::optional<ApiError> {
    auto fn = c.is_object() ? c.find("function") : c.end();
    if (fn == c.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return bad_request(fmt::format("'{}.function.name' is required", cf), cf, "missing_field");
    auto args = fn->find("arguments");
    if (args != fn->end() && !args->is_null() && !args->is_object())
      return wrong_type(cf + ".function.arguments", "an object", *args);
    nlohmann::ordered_json call;
    call["type"] = "function";
    call["function"] = {
        {"name", (*fn)["name"]},
        {"arguments", args == fn->end() || args->is_null() ? nlohmann::ordered_json::object()
                                                           : nlohmann::ordered_json(*args)}};
    out.push_back(std::move(call));
    return std::nullopt;
  };
  if (auto e = for_each_element(m, "tool_calls", field + ".tool_calls", each)) return e;
  if (!out.empty()) msg.tool_calls = std::move(out);
  return std::nullopt;
}

}  // namespace

std::variant<OllamaChatRequest, ApiError> parse_ollama_chat(const std::string& body,
                                                            const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  OllamaChatRequest r;
  if (auto e = read_common(j, defaults, r.gen)) return *e;
  if (auto e = read_function_tools(j, r.tools)) return *e;
  auto array = message_array(j);
  if (auto* e = std::get_if<ApiError>(&array)) return *e;
  const json* msgs = std::get<const json*>(array);
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(field, "an object", m);
    ChatMessage msg;
    if (auto e = read_string(m, "role", msg.role)) return *e;
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad_request(fmt::format("'{}.role' must be system, user, assistant or tool; got '{}'",
                                     field, msg.role),
                         field + ".role", "invalid_value");
    if (auto e = read_string(m, "content", msg.content)) return *e;
    if (auto e = refuse_images(m, field)) return *e;
    if (msg.role == "assistant")
      if (auto e = read_tool_calls(m, field, msg)) return *e;
    std::string tool_name;
    if (auto e = read_string(m, "tool_name", tool_name)) return *e;
    if (!tool_name.empty()) msg.name = std::move(tool_name);
    r.messages.push_back(std::move(msg));
  }
  return r;
}

std::variant<OllamaGenerateRequest, ApiError> parse_ollama_generate(
    const std::string& body, const RequestDefaults& defaults) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  OllamaGenerateRequest r;
  if (auto e = read_common(j, defaults, r.gen)) return *e;
  if (auto e = read_string(j, "prompt", r.prompt)) return *e;
  if (auto e = read_string(j, "system", r.system)) return *e;
  if (auto e = read_bool(j, "raw", r.raw)) return *e;
  if (auto e = refuse_images(j, "")) return *e;
  for (const char* f : {"suffix", "template"})
    if (auto it = j.find(f); it != j.end() && it->is_string() && !it->get<std::string>().empty())
      return unsupported(fmt::format("'{}' is not supported by this server", f), f);
  if (auto c = j.find("context"); c != j.end() && c->is_array() && !c->empty())
    return unsupported(
        "'context' (token ids of an earlier answer) is not supported: a conversation continues by "
        "sending its text again, whose KV the server keeps",
        "context");
  r.load_only = r.prompt.empty();
  return r;
}

std::variant<std::string, ApiError> parse_ollama_show(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  std::string model;
  if (auto e = read_string(j, "model", model)) return *e;
  if (model.empty())
    if (auto e = read_string(j, "name", model)) return *e;
  if (model.empty()) return bad_request("'model' is required", "model", "missing_field");
  return model;
}

}  // namespace tangram::server
