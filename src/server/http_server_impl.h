// The server's state and request handling (HttpServer::Impl), shared by the files that define
// its methods by endpoint family: http_server.cpp (routes, head checks, errors, lifecycle),
// generation.cpp (a generation request from fields to its blocking or streamed answer, shared by
// the three generating endpoints), endpoints_chat.cpp (chat completions and completions),
// endpoints_responses.cpp (the Responses API), endpoints_messages.cpp (Anthropic's Messages
// API), endpoints_ollama.cpp (Ollama's API), endpoints_sessions.cpp (conversations) and
// endpoints_admin.cpp (models, tokenize, detokenize, apply-template, metrics). Private to
// src/server.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <variant>

#include <fmt/format.h>

#include "chat/generic_tools.h"
#include "common/json_parse.h"
#include "common/sha256.h"
#include "grammar/grammar_constraint.h"
#include "http/http_server_core.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/context_fit.h"
#include "server/conversations.h"
#include "server/embeddings_request.h"
#include "server/http_server.h"
#include "server/ollama_request.h"
#include "server/ollama_response.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/output_constraint.h"
#include "server/request_checks.h"
#include "server/response_store.h"
#include "server/responses_json.h"
#include "server/responses_request.h"
#include "server/server_metrics.h"
#include "server/stream_formats.h"
#include "tokenizer/utf8.h"

namespace tangram::server {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the engine's callbacks (on its worker thread) hand to the HTTP thread of one request.
// What one choice of a request has produced.
struct ChoiceOutput {
  std::string pending;                         // text produced and not yet sent
  std::vector<TokenLogprob> pending_logprobs;  // of the tokens behind `pending` (when asked for)
  std::vector<TokenLogprob> logprobs;          // every token's, for a non-streamed answer
  std::optional<RequestResult> result;
};

struct Channel {
  explicit Channel(int n) : choices(static_cast<size_t>(n)), unfinished(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ChoiceOutput> choices;  // [n]
  int unfinished;                     // choices without a result
  int64_t tokens = 0;                 // over all choices
  // Every choice has its result (the last one is set after the request's bookkeeping).
  bool done() const {
    return std::all_of(choices.begin(), choices.end(),
                       [](const ChoiceOutput& c) { return c.result.has_value(); });
  }
  // The first failed choice's result, or null.
  const RequestResult* failed() const {
    for (const ChoiceOutput& c : choices)
      if (c.result &&
          (c.result->finish == FinishReason::Error || c.result->finish == FinishReason::Cancelled))
        return &*c.result;
    return nullptr;
  }
  Clock::time_point received;
  Clock::time_point first_token;
  Clock::time_point last_token;
};

enum class Endpoint { Chat, Completion, Responses, Messages, OllamaChat, OllamaGenerate };

// The body errors take: OpenAI's {"error": {...}}, Anthropic's {"type": "error", ...} for the
// Messages API, or Ollama's {"error": "..."} under /api/: each family's clients read only their
// own.
enum class ErrorShape { OpenAI, Anthropic, Ollama };

inline ErrorShape error_shape_of_path(const std::string& path) {
  if (path.rfind("/v1/messages", 0) == 0) return ErrorShape::Anthropic;
  if (path.rfind("/api/", 0) == 0) return ErrorShape::Ollama;
  return ErrorShape::OpenAI;
}

// What a Responses API turn adds to a generation: its response object and its chain.
struct ResponsesTurn {
  ResponseState state;
  std::vector<ChatMessage> input;           // this turn's input messages
  std::shared_ptr<const ChainLink> before;  // the chain of previous_response_id (null: none)
};

// One generation request as the handlers see it, from parsing to the response.
struct Generation {
  Endpoint endpoint = Endpoint::Chat;
  std::string request_id;
  std::string owner;
  std::string model;
  std::string history_text;  // the prompt's text ("" for token prompts): recorded with the reply
  ResolvedPrompt prompt;
  GenerationFields fields;
  std::string echo_prefix;                      // completions with echo: the prompt text
  std::optional<ResponsesTurn> responses;       // POST /v1/responses only
  ToolCallSyntax tools = ToolCallSyntax::None;  // tools were given: the reply is parsed for calls
  // The tools, when the template shows no tool-call syntax and the server teaches one itself
  // (chat/generic_tools.h); empty otherwise.
  nlohmann::json generic_tools = nlohmann::json::array();
  std::shared_ptr<const OutputGrammar> grammar;  // what the output is held to (null: free text)
  // A conversation longer than the context may drop its oldest turns (chat-like endpoints under
  // --context-overflow drop-oldest; Responses with truncation "auto"), and how many it dropped.
  bool may_drop = false;
  int64_t dropped_messages = 0;

  // The request field that holds the prompt, for errors about it.
  const char* prompt_field() const {
    switch (endpoint) {
      case Endpoint::Completion:
      case Endpoint::OllamaGenerate:
        return "prompt";
      case Endpoint::Responses:
        return "input";
      default:
        return "messages";
    }
  }
  const char* endpoint_name() const {
    switch (endpoint) {
      case Endpoint::Completion:
        return "completions";
      case Endpoint::Responses:
        return "responses";
      case Endpoint::Messages:
        return "messages";
      case Endpoint::OllamaChat:
        return "ollama_chat";
      case Endpoint::OllamaGenerate:
        return "ollama_generate";
      case Endpoint::Chat:
        break;
    }
    return "chat";
  }
  bool ollama() const {
    return endpoint == Endpoint::OllamaChat || endpoint == Endpoint::OllamaGenerate;
  }
  ErrorShape error_shape() const {
    if (endpoint == Endpoint::Messages) return ErrorShape::Anthropic;
    return ollama() ? ErrorShape::Ollama : ErrorShape::OpenAI;
  }
};

// The owner id of an API key: a digest of the key itself, never its position in --api-key, so
// that a conversation (its engine key, disk file and Redis key) stays with its key across
// restarts and replicas whatever the list, and a key that is gone owns nothing anyone can reach.
// 128 bits of SHA-256 (domain-separated): collision-free in practice, and the key is not
// recoverable from logs, file headers or Redis keys.
inline std::string owner_id(const std::string& api_key) {
  return "key-" + sha256_hex("tangram-owner\n" + api_key).substr(0, 32);
}

inline bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

// The vectors of an embedding request, in input order.
struct EmbeddingBatch {
  std::vector<std::vector<float>> vectors;  // [inputs][n_embd], unit length
  int64_t prompt_tokens = 0;                // over every input
  double seconds = 0;                       // submitted -> the last vector
};

inline std::string route_label(const std::string& path) {
  static const char* const kRoutes[] = {"/v1/chat/completions",
                                        "/v1/completions",
                                        "/v1/responses",
                                        "/v1/messages",
                                        "/v1/messages/count_tokens",
                                        "/api/chat",
                                        "/api/generate",
                                        "/api/tags",
                                        "/api/ps",
                                        "/api/show",
                                        "/api/version",
                                        "/api/embed",
                                        "/v1/embeddings",
                                        "/v1/models",
                                        "/v1/sessions",
                                        "/tokenize",
                                        "/detokenize",
                                        "/apply-template",
                                        "/health",
                                        "/ready",
                                        "/metrics",
                                        "/"};
  for (const char* r : kRoutes)
    if (path == r) return r;
  if (path.rfind("/v1/sessions/", 0) == 0) return "/v1/sessions/{id}";
  if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

http::ServerCoreOptions core_options(const ServerOptions& o, const Engine& engine);

struct HttpServer::Impl {
  Engine& engine;
  const Tokenizer& tok;
  ChatTemplate tmpl;
  ToolCallSyntax tool_syntax;  // how the template's model writes a tool call (None: no tools)
  std::shared_ptr<const TokenTexts> token_texts;  // every token's bytes, for constrained decoding
  ServerOptions opt;
  RequestDefaults defaults;
  http::ServerCore http;
  std::vector<std::string> owner_ids;  // owner_id of each --api-key, in order
  Conversations conversations;
  ResponseStore responses;  // stored Responses API responses, per key
  ServerMetrics metrics;
  AccessLog log;
  // How embeddings pool hidden states (--pooling, else the GGUF's), or why this model cannot embed.
  Result<Pooling> embedding_pooling;
  std::atomic<int64_t> pending{0};  // generation requests submitted and not finished
  std::atomic<bool> ready{false};
  std::atomic<double> recent_e2e_s{1.0};  // moving mean, for Retry-After
  int port = 0;
  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  std::set<RequestId> inflight;  // engine ids of this server's pending requests

  Impl(Engine& e, const Tokenizer& t, ChatTemplate ct, ServerOptions o)
      : engine(e),
        tok(t),
        tmpl(std::move(ct)),
        tool_syntax(detect_tool_call_syntax(tmpl.source())),
        token_texts(TokenTexts::from_tokenizer(t)),
        opt(std::move(o)),
        http(core_options(opt, e)),
        // A record that goes takes its KV with it; queued, as it runs under the records' lock.
        conversations(opt.max_conversations,
                      [&e](const std::string& key) { e.drop_session_later(key); }),
        responses(opt.max_conversations),
        log(opt.log_level),
        embedding_pooling(tangram::embedding_pooling(e.model().config().pooling, opt.pooling)) {
    for (const std::string& k : opt.api_keys) owner_ids.push_back(owner_id(k));
    defaults.params = opt.defaults;
    defaults.vocab_size = tok.n_vocab();
  }

  // ---- http_server.cpp: routes, head checks, errors ---------------------------------------------
  void send_error(http::Response& res, const ApiError& e, ErrorShape shape = ErrorShape::OpenAI);
  void send_json(http::Response& res, const ordered_json& j);
  // The caller's identity: its API key's owner_id, "local" without authentication. The key comes
  // from "Authorization: Bearer <key>" (scheme in any case, one space, nothing after the key) or,
  // as Anthropic's clients send it, from "x-api-key: <key>"; a request with both is refused by
  // check_request unless they agree.
  std::optional<std::string> owner_of(const http::Request& req) const;
  static bool open_path(const std::string& path);
  // Answers every request on its head, before its body is read: ambiguous headers, the Host it
  // names, the API key, and the body's media type.
  bool check_request(const http::Request& req, http::Response& res);
  // The body of an error the HTTP core answers by itself (no route, a limit, a timeout).
  void fill_core_error(const http::Request& req, http::Response& res, const std::string& message);
  // Counted before the response is written, so a client that reads /metrics next sees it.
  void count_and_log(const http::Request& req, const http::Response& res);
  void install_routes();

  // ---- generation.cpp: a generation request, from its fields to its answer ----------------------
  std::optional<ApiError> check_model(const std::string& model) const;
  std::optional<ApiError> session_from(const http::Request& req, GenerationFields& f) const;
  std::optional<ApiError> check_length(const Generation& g) const;
  ApiError queue_full();
  // Submits to the engine; the channel then receives the text and the result.
  std::variant<RequestId, ApiError> submit(const Generation& g, const std::shared_ptr<Channel>& ch);
  // On the engine's worker thread, once per choice. The conversation continues with choice 0;
  // the request's bookkeeping runs once, when its last choice ends.
  void finished(const Generation& g, Channel& ch, const RequestResult& result);
  void record_conversation(const Generation& g, const RequestResult& result);
  // The last choice of a request ended (`result`): metrics, log, then the answer is released.
  void request_done(const Generation& g, Channel& ch, const RequestResult& result);
  std::string recorded_reply(const Generation& g, const std::string& text) const;
  Usage usage_of(const Generation& g, const RequestResult& r) const;
  // The usage of a request whose every choice has its result: the prompt once (choices share
  // it), the completions of every choice.
  Usage request_usage(const Generation& g, const std::vector<ChoiceOutput>& choices) const;
  ResponseMeta meta_of(const Generation& g) const;
  static MessageMeta message_meta(const Generation& g);
  static OllamaMeta ollama_meta(const Generation& g);
  // A turn is answered once its session is written through (disk, Redis), so a crash after the
  // client has its answer never loses that turn. The write runs on the tiers' I/O thread; this
  // HTTP worker waits for it (milliseconds), the engine does not.
  void wait_durable(const Generation& g);
  void respond_blocking(const Generation& g, const std::shared_ptr<Channel>& ch, RequestId id,
                        const http::Request& req, http::Response& res);
  // A chat or completion response holding one choice (m.choice), with the request's usage.
  ordered_json choice_json(const Generation& g, const ResponseMeta& m, const RequestResult& r,
                           const std::vector<TokenLogprob>& logprobs, const Usage& usage) const;
  static ApiError generation_failed(const RequestResult& r);
  static bool wants_logprobs(const Generation& g);
  PieceOf piece_of() const;
  // The stream of one choice; with n > 1 its closing carries no usage (the request's follows).
  std::unique_ptr<StreamFormat> stream_format(const Generation& g, int choice) const;
  void respond_streaming(const Generation& g, std::shared_ptr<Channel> ch, RequestId id,
                         http::Response& res);
  // The client of a running request left: cancel it so its pages come back, and count the
  // disconnect once the engine has confirmed (bounded), so a client that reads /metrics after
  // seeing the disconnect counted also sees the request gone.
  void cancel_abandoned(Channel& ch, RequestId id);
  void run_generation(Generation& g, const http::Request& req, http::Response& res,
                      Clock::time_point received);
  // The steps both generation endpoints share: ids, the caller, the model and session fields.
  Generation start_generation(Endpoint endpoint, const http::Request& req, http::Response& res);
  std::optional<ApiError> take_fields(Generation& g, GenerationFields fields,
                                      const http::Request& req);
  // The prompt of messages through the chat template, BOS and EOS texts as the tokenizer has them;
  // with generic_tools, the messages as with_generic_tools() writes them.
  Result<RenderedChat> render_chat(
      const std::vector<ChatMessage>& messages, const nlohmann::json& extra,
      const nlohmann::json& generic_tools = nlohmann::json::array()) const;
  // With g.may_drop, leaves out the oldest turns of `messages` so that the prompt leaves room to
  // answer (context_fit.h), setting g.dropped_messages; an error when even the system prompt and
  // the last user turn do not fit.
  // `rendered`: the prompt of the messages kept, rendered on the way (so it is not rendered twice).
  std::optional<ApiError> fit_context(Generation& g, const std::vector<ChatMessage>& messages,
                                      const nlohmann::json& extra,
                                      std::optional<RenderedChat>& rendered) const;
  // Renders messages through the chat template and finds the conversation the prompt continues.
  // extra: template variables beyond the messages (e.g. tools).
  std::optional<ApiError> render_and_resolve(Generation& g,
                                             const std::vector<ChatMessage>& messages,
                                             const nlohmann::json& extra = {});
  // Tools given (and tool_choice not "none"): the template renders them and the reply is parsed
  // for calls in the template's syntax; for a template that shows none, the server writes them
  // into the system prompt in the Hermes syntax (chat/generic_tools.h) and parses that.
  std::optional<ApiError> take_tools(Generation& g, const nlohmann::json& tools,
                                     nlohmann::json& extra) const;
  // The grammar the output is held to: a forced tool call in the template's syntax (after
  // take_tools), or the response format; both at once are refused.
  std::optional<ApiError> take_constraint(Generation& g, const ToolChoice& choice,
                                          const nlohmann::json& tools, bool parallel) const;

  // ---- endpoints_chat.cpp: POST /v1/chat/completions and /v1/completions ------------------------
  void handle_chat(const http::Request& req, http::Response& res);
  void handle_completion(const http::Request& req, http::Response& res);

  // ---- endpoints_responses.cpp: the Responses API -----------------------------------------------
  // The finished response object of a Responses turn, kept (store: true) before the client sees
  // it, so that a next turn naming it as previous_response_id finds it.
  ordered_json store_response(const Generation& g, const RequestResult& r,
                              const std::vector<TokenLogprob>& logprobs);
  // The reply of a Responses turn as the next turn's template sees it: its text, and its calls.
  static ChatMessage assistant_turn(const ResponseState& s);
  ApiError response_not_found(const std::string& id) const;
  // POST /v1/responses: a chat turn after the stored chain of previous_response_id. The prompt
  // is rendered from the whole chain, so its KV is found by the conversation it extends.
  void handle_responses(const http::Request& req, http::Response& res);
  void handle_get_response(const http::Request& req, http::Response& res);
  // Deletes the stored response only: the conversation's KV stays for the rest of its chain.
  void handle_delete_response(const http::Request& req, http::Response& res);

  // ---- endpoints_messages.cpp: Anthropic's Messages API
  // ------------------------------------------ POST /v1/messages: a chat turn in Anthropic's
  // shapes; its KV is reused as chat's is.
  void handle_messages(const http::Request& req, http::Response& res);
  // POST /v1/messages/count_tokens: the prompt's tokens as /v1/messages would render them.
  void handle_count_tokens(const http::Request& req, http::Response& res);

  // ---- endpoints_ollama.cpp: Ollama's API ------------------------------------------------------
  // The model name as Ollama's clients send it: "NAME" or "NAME:latest" both name the served model.
  std::string ollama_model_name() const;
  // 404 in Ollama's words unless `name` is the served model by either name.
  std::optional<ApiError> check_ollama_model(const std::string& name) const;
  void handle_ollama_chat(const http::Request& req, http::Response& res);
  void handle_ollama_generate(const http::Request& req, http::Response& res);
  // GET /api/tags and /api/ps: the served model, with its file's size, digest and details.
  void handle_ollama_tags(const http::Request& req, http::Response& res, bool running);
  void handle_ollama_show(const http::Request& req, http::Response& res);

  // ---- endpoints_embeddings.cpp: POST /v1/embeddings and /api/embed ---------------------------
  // Runs every input through the engine (one batch, one place in the queue) and waits for the
  // vectors; model_field names the field an error about the model points at.
  std::variant<EmbeddingBatch, ApiError> embed(const EmbeddingsRequest& r, const char* model_field);
  void handle_embeddings(const http::Request& req, http::Response& res);
  void handle_ollama_embed(const http::Request& req, http::Response& res);

  // ---- endpoints_sessions.cpp: GET and DELETE /v1/sessions --------------------------------------
  void handle_sessions(const http::Request& req, http::Response& res);
  void handle_delete_session(const http::Request& req, http::Response& res);

  // ---- endpoints_admin.cpp: models, tokenizer helpers, metrics ----------------------------------
  void handle_models(const http::Request&, http::Response& res);
  // llama.cpp's helpers: what the model's tokenizer and template make of a text or messages.
  void handle_tokenize(const http::Request& req, http::Response& res);
  void handle_detokenize(const http::Request& req, http::Response& res);
  void handle_apply_template(const http::Request& req, http::Response& res);
  void handle_metrics(const http::Request&, http::Response& res);
};

}  // namespace tangram::server
