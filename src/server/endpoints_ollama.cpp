#include <sys/stat.h>

#include <map>

#include "server/http_server_impl.h"
#include "store/session_fingerprint.h"

namespace tangram::server {
namespace {

// "4.0B", "260.1K": parameters as Ollama's details write them.
std::string parameter_size(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.1f}B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
}

// What Ollama's listings say of a model file: its architecture, parameters, and the tensor type
// holding most of its bytes (its "quantization_level").
struct ModelSummary {
  std::string arch;
  int64_t parameters = 0;
  GgmlType main_type = GgmlType::F32;
};

ModelSummary summarize(const GgufFile& gguf) {
  ModelSummary s;
  s.arch = gguf.get_string("general.architecture").value_or("");
  std::map<GgmlType, size_t> bytes;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    s.parameters += t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    bytes[t.type] += t.nbytes;
  }
  size_t most = 0;
  for (const auto& [type, n] : bytes)
    if (n > most) {
      most = n;
      s.main_type = type;
    }
  return s;
}

ordered_json model_details(const ModelSummary& s) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", s.arch},
          {"families", ordered_json::array({s.arch})},
          {"parameter_size", parameter_size(s.parameters)},
          {"quantization_level", std::string(ggml_type_name(s.main_type))}};
}

std::string modified_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return rfc3339_now();
  return rfc3339_utc(int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec);
}

ChatMessage message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

}  // namespace

std::string HttpServer::Impl::ollama_model_name() const {
  return opt.model_name.find(':') == std::string::npos ? opt.model_name + ":latest"
                                                       : opt.model_name;
}

std::optional<ApiError> HttpServer::Impl::check_ollama_model(const std::string& name) const {
  if (name == opt.model_name || name == ollama_model_name()) return std::nullopt;
  return ApiError{404,
                  fmt::format("model '{}' not found; this server serves '{}' (GET /api/tags)", name,
                              ollama_model_name()),
                  "invalid_request_error",
                  "model",
                  "model_not_found",
                  0};
}

void HttpServer::Impl::handle_ollama_chat(const http::Request& req, http::Response& res) {
  const auto received = Clock::now();
  Generation g = start_generation(Endpoint::OllamaChat, req, res);
  auto fail = [&](const ApiError& e) { send_error(res, e, ErrorShape::Ollama); };
  auto parsed = parse_ollama_chat(req.body, defaults);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(*e);
  auto& cr = std::get<OllamaChatRequest>(parsed);
  if (auto e = check_ollama_model(cr.gen.model)) return fail(*e);
  g.model = cr.gen.model;  // answers name the model as the client did ("NAME" or "NAME:latest")
  cr.gen.model = opt.model_name;
  if (auto e = take_fields(g, std::move(cr.gen), req)) return fail(*e);
  nlohmann::json extra;
  if (auto e = take_tools(g, cr.tools, extra)) return fail(*e);
  if (auto e = take_constraint(g, ToolChoice{}, cr.tools, true)) return fail(*e);
  g.may_drop = opt.context_overflow != ContextOverflow::Refuse;
  if (auto e = render_and_resolve(g, cr.messages, extra)) return fail(*e);
  run_generation(g, req, res, received);
}

void HttpServer::Impl::handle_ollama_generate(const http::Request& req, http::Response& res) {
  const auto received = Clock::now();
  Generation g = start_generation(Endpoint::OllamaGenerate, req, res);
  auto fail = [&](const ApiError& e) { send_error(res, e, ErrorShape::Ollama); };
  auto parsed = parse_ollama_generate(req.body, defaults);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(*e);
  auto& gr = std::get<OllamaGenerateRequest>(parsed);
  if (auto e = check_ollama_model(gr.gen.model)) return fail(*e);
  g.model = gr.gen.model;
  gr.gen.model = opt.model_name;
  if (auto e = take_fields(g, std::move(gr.gen), req)) return fail(*e);
  if (gr.load_only) {
    // Clients send an empty prompt to load a model; this one is loaded since the server started.
    return send_json(res, ordered_json{{"model", g.model},
                                       {"created_at", rfc3339_now()},
                                       {"response", ""},
                                       {"done", true},
                                       {"done_reason", "load"}});
  }
  if (auto e = take_constraint(g, ToolChoice{}, nlohmann::json::array(), false)) return fail(*e);
  if (gr.raw) {
    // The prompt as it is, with a BOS where the vocabulary asks for one (as completions do).
    g.history_text = gr.prompt;
    if (auto e = conversations.resolve_text(g.owner, g.fields.session_id, gr.prompt,
                                            /*add_special=*/true, tok, g.prompt))
      return fail(*e);
  } else {
    std::vector<ChatMessage> messages;
    if (!gr.system.empty()) messages.push_back(message("system", gr.system));
    messages.push_back(message("user", gr.prompt));
    if (auto e = render_and_resolve(g, messages)) return fail(*e);
  }
  run_generation(g, req, res, received);
}

void HttpServer::Impl::handle_ollama_tags(const http::Request&, http::Response& res, bool running) {
  const GgufFile& gguf = engine.model().gguf();
  ordered_json m = {{"name", ollama_model_name()},
                    {"model", ollama_model_name()},
                    {"modified_at", modified_at(gguf.path())},
                    {"size", gguf.file_size()},
                    // Not a SHA-256 of the file (hashing gigabytes per listing): the engine's
                    // fingerprint of it, which tells files apart.
                    {"digest", fmt::format("{:016x}", model_fingerprint(gguf))},
                    {"details", model_details(summarize(gguf))}};
  if (running) {
    m["expires_at"] = rfc3339_utc(int64_t{4'000'000'000} * 1'000'000'000);  // never unloaded
    m["size_vram"] = 0;
    m["context_length"] = engine.context();
  }
  send_json(res, ordered_json{{"models", ordered_json::array({m})}});
}

void HttpServer::Impl::handle_ollama_show(const http::Request& req, http::Response& res) {
  auto fail = [&](const ApiError& e) { send_error(res, e, ErrorShape::Ollama); };
  auto parsed = parse_ollama_show(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(*e);
  const std::string& name = std::get<std::string>(parsed);
  if (auto e = check_ollama_model(name)) return fail(*e);
  const GgufFile& gguf = engine.model().gguf();
  const ModelSummary summary = summarize(gguf);
  // Tools work with every template: one without a tool-call syntax gets the server's own.
  const ordered_json capabilities = ordered_json::array({"completion", "tools"});
  send_json(res, ordered_json{{"modelfile", ""},
                              {"parameters", ""},
                              {"template", tmpl.source()},
                              {"details", model_details(summary)},
                              {"model_info",
                               {{"general.architecture", summary.arch},
                                {"general.parameter_count", summary.parameters},
                                {summary.arch + ".context_length", engine.context()}}},
                              {"capabilities", capabilities},
                              {"modified_at", modified_at(gguf.path())}});
}

}  // namespace tangram::server
