#include "server/http_server.h"

#include "server/chat_page.h"
#include "server/http_server_impl.h"

namespace tangram::server {

void HttpServer::Impl::send_error(http::Response& res, const ApiError& e, ErrorShape shape) {
  res.status = e.status;
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  ordered_json body;
  switch (shape) {
    case ErrorShape::Anthropic:
      body = anthropic_error_json(e);
      break;
    case ErrorShape::Ollama:
      body = ollama_error_json(e);
      break;
    case ErrorShape::OpenAI:
      body = error_json(e);
      break;
  }
  res.set_content(dump_json(body), "application/json");
}

void HttpServer::Impl::send_json(http::Response& res, const ordered_json& j) {
  res.set_content(dump_json(j), "application/json");
}

std::optional<std::string> HttpServer::Impl::owner_of(const http::Request& req) const {
  if (opt.api_keys.empty()) return std::string("local");
  const std::string auth = req.header("Authorization");
  constexpr std::string_view prefix = "Bearer ";
  std::string key = req.header("x-api-key");
  if (!auth.empty()) {
    if (auth.size() <= prefix.size() ||
        !http::iequals(std::string_view(auth).substr(0, prefix.size()), prefix))
      return std::nullopt;
    if (!key.empty() && !constant_time_equal(key, auth.substr(prefix.size()))) return std::nullopt;
    key = auth.substr(prefix.size());
  }
  if (key.empty()) return std::nullopt;
  for (size_t i = 0; i < opt.api_keys.size(); ++i)
    if (constant_time_equal(key, opt.api_keys[i])) return owner_ids[i];
  return std::nullopt;
}

bool HttpServer::Impl::open_path(const std::string& path) {
  return path == "/health" || path == "/ready" || path == "/metrics" || path == "/" ||
         path == "/favicon.ico";
}

bool HttpServer::Impl::check_request(const http::Request& req, http::Response& res) {
  const ErrorShape shape = error_shape_of_path(req.path);
  for (const char* once : {"Authorization", "x-api-key", "X-Session-Id", "Content-Type"})
    if (req.header_count(once) > 1) {
      send_error(res,
                 bad_request(fmt::format("the request carries the header {} more than once", once),
                             "", "ambiguous_header"),
                 shape);
      return true;
    }
  if (const std::string host = req.header("Host");
      !host.empty() && !allowed_host(host, opt.host, opt.allowed_hosts)) {
    send_error(
        res,
        ApiError{403,
                 fmt::format("this server does not answer to the host name '{}'; start it with "
                             "--allowed-host NAME to allow it",
                             host.substr(0, 100)),
                 "invalid_request_error", "", "host_not_allowed", 0},
        shape);
    return true;
  }
  if (!open_path(req.path) && !owner_of(req)) {
    send_error(
        res,
        ApiError{401,
                 "missing or invalid API key: send the header 'Authorization: Bearer <key>' (or "
                 "'x-api-key: <key>') with a key given to the server's --api-key",
                 "invalid_request_error", "", "invalid_api_key", 0},
        shape);
    return true;
  }
  if (req.method == "POST" && !is_json_media_type(req.header("Content-Type"))) {
    send_error(
        res,
        ApiError{
            415,
            fmt::format("send the body as JSON with the header 'Content-Type: application/json' "
                        "(got '{}')",
                        req.header("Content-Type").substr(0, 100)),
            "invalid_request_error", "", "unsupported_media_type", 0},
        shape);
    return true;
  }
  return false;
}

void HttpServer::Impl::fill_core_error(const http::Request& req, http::Response& res,
                                       const std::string& message) {
  const int status = res.status;
  std::string code = "bad_request";
  switch (status) {
    case 404:
      code = "not_found";
      break;
    case 405:
      code = "method_not_allowed";
      break;
    case 408:
      code = "request_timeout";
      break;
    case 413:
      code = "payload_too_large";
      break;
    case 414:
      code = "uri_too_long";
      break;
    case 415:
      code = "unsupported_content_encoding";
      break;
    case 417:
      code = "expectation_failed";
      break;
    case 431:
      code = "headers_too_large";
      break;
    case 500:
      code = "internal_error";
      break;
    case 501:
      code = "not_implemented";
      break;
    case 503:
      code = "too_many_connections";
      break;
    case 505:
      code = "http_version_not_supported";
      break;
    default:
      break;
  }
  if (status >= 500 && status != 503 && status != 505)
    log.write(LogLevel::Error, "http_error", {{"path", req.path}, {"what", message}});
  const int retry = res.header("Retry-After").empty() ? 0 : 1;
  send_error(res,
             ApiError{status, message, status >= 500 ? "server_error" : "invalid_request_error", "",
                      code, retry},
             error_shape_of_path(req.path));
}

void HttpServer::Impl::count_and_log(const http::Request& req, const http::Response& res) {
  metrics.count_response(route_label(req.path), res.status);
  const bool generation = req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
                          req.path == "/v1/responses" || req.path == "/v1/messages" ||
                          req.path == "/api/chat" || req.path == "/api/generate";
  // Generations that reached the engine are logged when they finish, with their figures.
  if (generation && (res.status == 200 || res.status == 499)) return;
  log.write(
      res.status >= 500 ? LogLevel::Warn : (res.status >= 400 ? LogLevel::Info : LogLevel::Debug),
      "http",
      {{"id", res.header("X-Request-Id")},
       {"method", req.method},
       {"path", req.path},
       {"status", std::to_string(res.status)},
       {"remote", req.remote_addr}});
}

void HttpServer::Impl::install_routes() {
  using http::Lane;
  http.set_head_check(
      [this](const http::Request& req, http::Response& res) { return check_request(req, res); });
  http.set_after(
      [this](const http::Request& req, const http::Response& res) { count_and_log(req, res); });
  http.set_error_filler([this](const http::Request& req, http::Response& res,
                               const std::string& message) { fill_core_error(req, res, message); });
  // Generations may run (and stream) for minutes: they get the work lane; everything else is
  // answered from the control lane, so health checks and metrics never wait behind them.
  http.route("POST", "/v1/chat/completions", Lane::Work,
             [this](auto& req, auto& res) { handle_chat(req, res); });
  http.route("POST", "/v1/completions", Lane::Work,
             [this](auto& req, auto& res) { handle_completion(req, res); });
  http.route("POST", "/v1/responses", Lane::Work,
             [this](auto& req, auto& res) { handle_responses(req, res); });
  http.route("POST", "/v1/messages", Lane::Work,
             [this](auto& req, auto& res) { handle_messages(req, res); });
  http.route("POST", "/v1/messages/count_tokens", Lane::Work,
             [this](auto& req, auto& res) { handle_count_tokens(req, res); });
  http.route("POST", "/api/chat", Lane::Work,
             [this](auto& req, auto& res) { handle_ollama_chat(req, res); });
  http.route("POST", "/api/generate", Lane::Work,
             [this](auto& req, auto& res) { handle_ollama_generate(req, res); });
  http.route("POST", "/v1/embeddings", Lane::Work,
             [this](auto& req, auto& res) { handle_embeddings(req, res); });
  http.route("POST", "/api/embed", Lane::Work,
             [this](auto& req, auto& res) { handle_ollama_embed(req, res); });
  http.route("GET", "/api/tags", Lane::Control,
             [this](auto& req, auto& res) { handle_ollama_tags(req, res, /*running=*/false); });
  http.route("GET", "/api/ps", Lane::Control,
             [this](auto& req, auto& res) { handle_ollama_tags(req, res, /*running=*/true); });
  http.route("POST", "/api/show", Lane::Work,
             [this](auto& req, auto& res) { handle_ollama_show(req, res); });
  http.route("GET", "/api/version", Lane::Control, [this](auto&, auto& res) {
    send_json(res, ordered_json{{"version", kOllamaApiVersion}});
  });
  http.route("GET", "/v1/responses/:id", Lane::Control,
             [this](auto& req, auto& res) { handle_get_response(req, res); });
  http.route("DELETE", "/v1/responses/:id", Lane::Control,
             [this](auto& req, auto& res) { handle_delete_response(req, res); });
  http.route("POST", "/tokenize", Lane::Work,
             [this](auto& req, auto& res) { handle_tokenize(req, res); });
  http.route("POST", "/detokenize", Lane::Work,
             [this](auto& req, auto& res) { handle_detokenize(req, res); });
  http.route("POST", "/apply-template", Lane::Work,
             [this](auto& req, auto& res) { handle_apply_template(req, res); });
  http.route("GET", "/v1/models", Lane::Control,
             [this](auto& req, auto& res) { handle_models(req, res); });
  http.route("GET", "/v1/sessions", Lane::Control,
             [this](auto& req, auto& res) { handle_sessions(req, res); });
  http.route("DELETE", "/v1/sessions/:id", Lane::Control, [this](auto& req, auto& res) {
    if (!valid_session_id(req.params.at(0)))
      return send_error(res,
                        bad_request("a session id is 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                                    "session_id", "invalid_session_id"));
    handle_delete_session(req, res);
  });
  http.route("GET", "/health", Lane::Control, [this](auto&, auto& res) {
    send_json(res, ordered_json{{"status", "ok"}});
  });
  http.route("GET", "/ready", Lane::Control, [this](auto&, auto& res) {
    if (!ready.load())
      return send_error(res, ApiError{503, "the server is starting or stopping", "server_error", "",
                                      "not_ready", 0});
    send_json(res, ordered_json{{"status", "ready"}, {"model", opt.model_name}});
  });
  http.route("GET", "/metrics", Lane::Control,
             [this](auto& req, auto& res) { handle_metrics(req, res); });
  http.route("GET", "/", Lane::Control, [](auto&, auto& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });
  http.route("GET", "/favicon.ico", Lane::Control, [](auto&, auto& res) { res.status = 204; });
}

http::ServerCoreOptions core_options(const ServerOptions& o, const Engine& engine) {
  http::ServerCoreOptions c;
  c.host = o.host;
  c.port = o.port;
  c.limits.max_body = o.max_body_bytes;
  c.max_buffered_body = o.max_body_in_flight;
  c.limits.max_headers = o.max_headers;
  c.limits.max_header_bytes = o.max_header_bytes;
  c.read_timeout_s = o.read_timeout_s;
  c.write_timeout_s = o.write_timeout_s;
  c.keep_alive_s = o.keep_alive_s;
  // Each open stream holds one work thread; the queue bound keeps streams below the pool size.
  c.work_threads =
      o.http_threads > 0 ? o.http_threads : engine.options().max_running + o.max_queue + 16;
  c.max_connections = o.max_connections;
  c.max_connections_per_ip = o.max_connections_per_ip;
  return c;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpServer>> HttpServer::create(Engine& engine, const Tokenizer& tokenizer,
                                                       ChatTemplate chat_template,
                                                       ServerOptions options) {
  if (options.max_queue < 0)
    return make_error("--max-queue must be >= 0, got {}", options.max_queue);
  if (options.read_timeout_s < 1 || options.write_timeout_s < 1)
    return make_error("read and write timeouts must be at least 1 s");
  if (options.max_connections < 1 || options.max_connections_per_ip < 1)
    return make_error("--max-connections and --max-connections-per-ip must be at least 1");
  for (const std::string& k : options.api_keys)
    if (k.empty() || k.find_first_of(" \t\r\n") != std::string::npos)
      return make_error("an API key must be non-empty and hold no whitespace");
  auto impl =
      std::make_unique<Impl>(engine, tokenizer, std::move(chat_template), std::move(options));
  Impl& s = *impl;
  s.install_routes();
  // Conversations a previous run left in the disk tier continue, by id or by their text.
  std::vector<std::pair<std::string, std::vector<int32_t>>> named;
  engine.run_on_worker([&](Scheduler& sch) { named = sch.sessions().named_sessions(); });
  // Only sessions of the keys given now: one whose key is gone stays unreachable.
  std::set<std::string> owners(s.owner_ids.begin(), s.owner_ids.end());
  if (owners.empty()) owners.insert("local");
  if (const size_t restored = s.conversations.restore(named, tokenizer, owners); restored > 0)
    s.log.write(LogLevel::Info, "sessions_restored", {{"conversations", std::to_string(restored)}});
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() {
  impl_->ready = false;
  impl_->http.stop();
  // The engine's callbacks hold `impl_`: cancel what is pending and wait until all are done.
  std::vector<RequestId> ids;
  {
    std::lock_guard lock(impl_->inflight_mu);
    ids.assign(impl_->inflight.begin(), impl_->inflight.end());
  }
  for (RequestId id : ids) impl_->engine.cancel(id);
  std::unique_lock lock(impl_->inflight_mu);
  impl_->inflight_cv.wait(lock, [&] { return impl_->inflight.empty(); });
}

Result<int> HttpServer::bind() {
  TG_ASSIGN(const int port, impl_->http.bind());
  impl_->port = port;
  return port;
}

Status HttpServer::serve() {
  impl_->ready = true;
  Status st = impl_->http.serve();
  impl_->ready = false;
  return st;
}

void HttpServer::stop() {
  impl_->ready = false;
  impl_->http.stop();
}

}  // namespace tangram::server
