// `tangram serve`: the OpenAI-compatible HTTP server in front of one Engine.
//
// Endpoints: POST /v1/chat/completions and /v1/completions (streaming with Server-Sent Events),
// GET /v1/models, GET /v1/sessions and DELETE /v1/sessions/{id} (the caller's conversations),
// GET /health (liveness), GET /ready (accepting work), GET /metrics (Prometheus), GET / (a chat
// page). Every generation goes through the engine's one scheduler (continuous batching); a
// bounded number of requests may wait, beyond which the server answers 429 with Retry-After.
// With API keys, every endpoint except /health, /ready, /metrics and / needs
// "Authorization: Bearer KEY", and conversations belong to the key that made them. Before any
// body is read, every request's head is checked: its key, a Host the server answers to, and
// "Content-Type: application/json" on the endpoints that take JSON (so that a web page cannot
// post to a local server: browsers send that type cross-origin only after a CORS preflight,
// which this server does not grant).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/result.h"
#include "engine/engine.h"
#include "model/pooling.h"
#include "runtime/sampling_params.h"
#include "server/access_log.h"
#include "tokenizer/tokenizer.h"

namespace tangram::server {

// What a chat whose history outgrows the context gets: its oldest turns left out (the system
// prompt and the last user turn kept) with the KV of the turns kept moved to their new positions
// (Shift: keys re-rotated, nothing recomputed), or recomputed (DropOldest), or a refusal
// (context_length_exceeded).
enum class ContextOverflow { Shift, DropOldest, Refuse };

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (bind() returns it)
  std::vector<std::string> api_keys;  // empty: no authentication
  // Host header names accepted besides IP literals, "localhost" (and *.localhost) and `host`;
  // "*" accepts any. Other names get 403 (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  std::string model_name = "tangram";  // the id /v1/models lists and requests may name
  int max_queue = 64;                  // generation requests that may wait beyond the running ones
  int http_threads = 0;                // connection workers; 0: max_running + max_queue + 16
  size_t max_body_bytes = size_t{8} << 20;  // of the decoded body (after chunking and gzip)
  size_t max_body_in_flight =
      0;  // bodies held at once over all connections (503 beyond); 0: 32 x max_body_bytes
  size_t max_headers = 100;             // header fields of a request (431 beyond)
  size_t max_header_bytes = 64 * 1024;  // all of a request's header lines together (431 beyond)
  size_t max_connections = 1024;        // open at once (503 beyond; kept below the fd limit)
  size_t max_connections_per_ip = 256;  // open at once from one client address
  int read_timeout_s = 10;              // for a whole request, head and body, from its first byte
  int write_timeout_s = 30;
  int keep_alive_s = 5;
  size_t max_conversations =
      10000;  // conversation records kept per API key (its least recently used dropped)
  LogLevel log_level = LogLevel::Info;
  SamplingParams defaults;  // sampling defaults of a request that sets nothing
  // Chat, Messages and Ollama chat; the Responses API follows each request's "truncation".
  ContextOverflow context_overflow = ContextOverflow::Shift;
  // How /v1/embeddings and /api/embed pool hidden states; nullopt: as the GGUF says, else the
  // last token's.
  std::optional<Pooling> pooling;
};

class HttpServer {
 public:
  // engine, tokenizer must outlive the server. The chat template renders /v1/chat/completions.
  static Result<std::unique_ptr<HttpServer>> create(Engine& engine, const Tokenizer& tokenizer,
                                                    ChatTemplate chat_template,
                                                    ServerOptions options);
  // Stops listening, cancels this server's pending requests and waits for them.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (useful with port 0).
  Result<int> bind();
  // Serves until stop() (from another thread or a signal handler's helper thread).
  Status serve();
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tangram::server
