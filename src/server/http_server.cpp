#include "server/http_server.h"

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

#include "common/json_parse.h"
#include "common/sha256.h"
#include "grammar/grammar_constraint.h"
#include "http/http_server_core.h"
#include "server/api_error.h"
#include "server/chat_page.h"
#include "server/conversations.h"
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
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t unix_now() {
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

enum class Endpoint { Chat, Completion, Responses };

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
  std::string echo_prefix;                       // completions with echo: the prompt text
  std::optional<ResponsesTurn> responses;        // POST /v1/responses only
  ToolCallSyntax tools = ToolCallSyntax::None;   // tools were given: the reply is parsed for calls
  std::shared_ptr<const OutputGrammar> grammar;  // what the output is held to (null: free text)

  // The request field that holds the prompt, for errors about it.
  const char* prompt_field() const {
    return endpoint == Endpoint::Completion
               ? "prompt"
               : (endpoint == Endpoint::Responses ? "input" : "messages");
  }
  const char* endpoint_name() const {
    return endpoint == Endpoint::Completion
               ? "completions"
               : (endpoint == Endpoint::Responses ? "responses" : "chat");
  }
};

// The owner id of an API key: a digest of the key itself, never its position in --api-key, so
// that a conversation (its engine key, disk file and Redis key) stays with its key across
// restarts and replicas whatever the list, and a key that is gone owns nothing anyone can reach.
// 128 bits of SHA-256 (domain-separated): collision-free in practice, and the key is not
// recoverable from logs, file headers or Redis keys.
std::string owner_id(const std::string& api_key) {
  return "key-" + sha256_hex("tangram-owner\n" + api_key).substr(0, 32);
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::string route_label(const std::string& path) {
  static const char* const kRoutes[] = {"/v1/chat/completions",
                                        "/v1/completions",
                                        "/v1/responses",
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

}  // namespace

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
        log(opt.log_level) {
    for (const std::string& k : opt.api_keys) owner_ids.push_back(owner_id(k));
    defaults.params = opt.defaults;
    defaults.vocab_size = tok.n_vocab();
  }

  // ---- plumbing ----------------------------------------------------------------------------

  void send_error(http::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(dump_json(error_json(e)), "application/json");
  }

  void send_json(http::Response& res, const ordered_json& j) {
    res.set_content(dump_json(j), "application/json");
  }

  // The caller's identity: its API key's owner_id, "local" without authentication. The header
  // must be exactly "Bearer <key>" (scheme in any case, one space, nothing after the key).
  std::optional<std::string> owner_of(const http::Request& req) const {
    if (opt.api_keys.empty()) return std::string("local");
    const std::string auth = req.header("Authorization");
    constexpr std::string_view prefix = "Bearer ";
    if (auth.size() <= prefix.size() ||
        !http::iequals(std::string_view(auth).substr(0, prefix.size()), prefix))
      return std::nullopt;
    const std::string key = auth.substr(prefix.size());
    for (size_t i = 0; i < opt.api_keys.size(); ++i)
      if (constant_time_equal(key, opt.api_keys[i])) return owner_ids[i];
    return std::nullopt;
  }

  static bool open_path(const std::string& path) {
    return path == "/health" || path == "/ready" || path == "/metrics" || path == "/" ||
           path == "/favicon.ico";
  }

  // ---- generation --------------------------------------------------------------------------

  std::optional<ApiError> check_model(const std::string& model) const {
    if (model.empty() || model == opt.model_name) return std::nullopt;
    return ApiError{
        404,
        fmt::format("the model '{}' does not exist; this server serves '{}' (GET /v1/models)",
                    model, opt.model_name),
        "invalid_request_error",
        "model",
        "model_not_found",
        0};
  }

  std::optional<ApiError> session_from(const http::Request& req, GenerationFields& f) const {
    const std::string header = req.header("X-Session-Id");
    if (header.empty()) return std::nullopt;
    if (!valid_session_id(header))
      return bad_request(
          "the X-Session-Id header must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
          "session_id", "invalid_session_id");
    if (!f.session_id.empty() && f.session_id != header)
      return bad_request("'session_id' and the X-Session-Id header name different sessions",
                         "session_id", "invalid_session_id");
    f.session_id = header;
    return std::nullopt;
  }

  std::optional<ApiError> check_length(const Generation& g) const {
    const auto n = static_cast<int64_t>(g.prompt.tokens.size());
    const int64_t ctx = engine.context();
    if (n + 1 > ctx)
      return bad_request(
          fmt::format("the prompt is {} tokens, and the context holds {} with at least one to "
                      "generate: shorten it by {} tokens",
                      n, ctx, n + 1 - ctx),
          g.prompt_field(), "context_length_exceeded");
    return std::nullopt;
  }

  ApiError queue_full() {
    metrics.count_rejected_queue_full();
    const int retry = std::clamp(static_cast<int>(std::ceil(recent_e2e_s.load())), 1, 60);
    return ApiError{
        429,
        fmt::format("the server is at capacity ({} requests running or queued); retry in {} s",
                    pending.load(), retry),
        "rate_limit_error",
        "",
        "queue_full",
        retry};
  }

  // Submits to the engine; the channel then receives the text and the result.
  std::variant<RequestId, ApiError> submit(const Generation& g,
                                           const std::shared_ptr<Channel>& ch) {
    const int64_t limit = engine.options().max_running + opt.max_queue;
    if (pending.fetch_add(1) >= limit) {
      pending.fetch_sub(1);
      return queue_full();
    }
    Request r;
    r.prompt = g.prompt.tokens;
    r.params = g.fields.params;
    r.session_id = g.prompt.engine_session;
    r.top_logprobs = g.fields.top_logprobs;
    r.n = g.fields.n;
    r.keep_other_choices =
        false;  // only choice 0 continues the conversation; the others' pages are freed
    if (g.grammar) r.constraint = std::make_shared<const GrammarConstraint>(g.grammar, token_texts);
    r.on_token = [ch](const TokenEvent& e) {
      std::lock_guard lock(ch->mu);
      const auto now = Clock::now();
      if (ch->tokens == 0) ch->first_token = now;
      ch->last_token = now;
      ++ch->tokens;
      ChoiceOutput& c = ch->choices[static_cast<size_t>(e.choice)];
      c.pending.append(e.text);
      if (e.logprob != nullptr) {
        c.pending_logprobs.push_back(*e.logprob);
        c.logprobs.push_back(*e.logprob);
      }
      ch->cv.notify_all();
    };
    // Copies what on_finish needs: it may run after the handler has returned (a disconnect).
    r.on_finish = [this, ch, g](const RequestResult& result) { finished(g, *ch, result); };
    // Registered before submit so that on_finish (which may run at once) finds the id.
    std::lock_guard lock(inflight_mu);
    Result<RequestId> id = make_error("not submitted");
    if (auto gone = conversations.submit_if_current(g.owner, g.prompt,
                                                    [&] { id = engine.submit(std::move(r)); })) {
      pending.fetch_sub(1);
      return *gone;  // deleted since it was resolved
    }
    if (!id) {
      pending.fetch_sub(1);
      return bad_request(id.message(), g.prompt_field(), "invalid_request");
    }
    inflight.insert(*id);
    return *id;
  }

  // On the engine's worker thread, once per choice. The conversation continues with choice 0;
  // the request's bookkeeping runs once, when its last choice ends.
  void finished(const Generation& g, Channel& ch, const RequestResult& result) {
    bool last = false;
    {
      std::lock_guard lock(ch.mu);
      last = --ch.unfinished == 0;
      if (!last) ch.choices[static_cast<size_t>(result.choice)].result = result;
    }
    if (result.choice == 0) record_conversation(g, result);
    if (!last) {
      ch.cv.notify_all();
      return;
    }
    request_done(g, ch, result);
  }

  void record_conversation(const Generation& g, const RequestResult& result) {
    if (result.finish == FinishReason::Stop || result.finish == FinishReason::Length) {
      // The conversation now holds the prompt and the reply as the client saw it. Its tokens
      // are kept as far as they spell that text: a control token the client never saw (or a
      // stop string cut from the text) ends what a next turn's prompt can reuse.
      // A reply that called tools is kept up to its first call: the next turn's template writes
      // the call in its own form, and the history must be a prefix of that rendering.
      const std::string reply = recorded_reply(g, result.text);
      std::vector<int32_t> tokens = g.prompt.tokens;
      std::string text = g.history_text.empty() ? std::string() : g.history_text + reply;
      size_t spelled = 0;
      for (int32_t t : result.tokens) {
        if (tok.is_control(t)) break;
        const std::string piece = tok.token_to_piece(t);
        if (reply.compare(spelled, piece.size(), piece) != 0) break;
        spelled += piece.size();
        tokens.push_back(t);
      }
      conversations.record(g.owner, g.prompt, std::move(text), std::move(tokens));
    } else {
      conversations.abandon(g.owner, g.prompt);
    }
  }

  // The last choice of a request ended (`result`): metrics, log, then the answer is released.
  void request_done(const Generation& g, Channel& ch, const RequestResult& result) {
    const auto now = Clock::now();
    RequestObservation o;
    {
      std::lock_guard lock(ch.mu);
      o.prompt_tokens = result.usage.prompt_tokens;
      o.cached_tokens = result.usage.cached_tokens;
      o.completion_tokens = result.usage.completion_tokens;
      for (const ChoiceOutput& c : ch.choices)
        if (c.result) o.completion_tokens += c.result->usage.completion_tokens;
      o.queue_s = result.timing.queue_seconds;
      o.e2e_s = seconds_between(ch.received, now);
      if (ch.tokens > 0) o.ttft_s = seconds_between(ch.received, ch.first_token);
      if (ch.tokens > 1)
        o.tpot_s =
            seconds_between(ch.first_token, ch.last_token) / static_cast<double>(ch.tokens - 1);
    }
    if (result.finish != FinishReason::Error) metrics.observe(o);
    recent_e2e_s.store(0.8 * recent_e2e_s.load() + 0.2 * o.e2e_s);
    log.write(result.finish == FinishReason::Error ? LogLevel::Warn : LogLevel::Info, "request",
              {{"id", g.request_id},
               {"endpoint", g.endpoint_name()},
               {"key", g.owner},
               {"session", g.prompt.public_id},
               {"stream", g.fields.stream ? "true" : "false"},
               {"prompt_tokens", std::to_string(o.prompt_tokens)},
               {"cached_tokens", std::to_string(o.cached_tokens)},
               {"completion_tokens", std::to_string(o.completion_tokens)},
               {"queue_ms", fmt::format("{:.1f}", 1e3 * o.queue_s)},
               {"ttft_ms", o.ttft_s >= 0 ? fmt::format("{:.1f}", 1e3 * o.ttft_s) : "-"},
               {"tpot_ms", o.tpot_s >= 0 ? fmt::format("{:.2f}", 1e3 * o.tpot_s) : "-"},
               {"e2e_ms", fmt::format("{:.1f}", 1e3 * o.e2e_s)},
               {"finish", std::string(finish_reason_name(result.finish))},
               {"error", result.error}});
    // Everything a client can read once it has its answer (metrics, the in-flight gauge, its
    // conversation) is settled before the channel wakes the HTTP worker that answers it.
    pending.fetch_sub(1);
    {
      std::lock_guard lock(ch.mu);
      ch.choices[static_cast<size_t>(result.choice)].result = result;
    }
    ch.cv.notify_all();
    std::lock_guard lock(inflight_mu);  // last: the destructor may free *this once it is empty
    inflight.erase(result.id);
    inflight_cv.notify_all();
  }

  std::string recorded_reply(const Generation& g, const std::string& text) const {
    if (g.tools == ToolCallSyntax::None || parse_tool_calls(g.tools, text).calls.empty())
      return text;
    return text.substr(0, tool_call_start(g.tools, text).value_or(text.size()));
  }

  Usage usage_of(const RequestResult& r) const {
    return Usage{r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_tokens};
  }

  // The usage of a request whose every choice has its result: the prompt once (choices share
  // it), the completions of every choice.
  Usage request_usage(const std::vector<ChoiceOutput>& choices) const {
    Usage u = usage_of(*choices[0].result);
    for (size_t i = 1; i < choices.size(); ++i)
      u.completion_tokens += choices[i].result->usage.completion_tokens;
    return u;
  }

  ResponseMeta meta_of(const Generation& g) const {
    return ResponseMeta{g.request_id, unix_now(), g.model, g.prompt.public_id};
  }

  // A turn is answered once its session is written through (disk, Redis), so a crash after the
  // client has its answer never loses that turn. The write runs on the tiers' I/O thread; this
  // HTTP worker waits for it (milliseconds), the engine does not.
  void wait_durable(const Generation& g) {
    if (!engine.wait_session_written(g.prompt.engine_session, std::chrono::seconds(5)))
      log.write(LogLevel::Warn, "session_write_slow", {{"session", g.prompt.public_id}});
  }

  void respond_blocking(const Generation& g, const std::shared_ptr<Channel>& ch, RequestId id,
                        const http::Request& req, http::Response& res) {
    // Nothing is written until the answer is complete, so a client that hangs up is found by
    // looking at its socket while waiting (a few times a second), and its request cancelled.
    std::unique_lock lock(ch->mu);
    while (!ch->cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return ch->done(); })) {
      lock.unlock();
      const bool gone = req.peer_closed();
      lock.lock();
      if (gone && !ch->done()) {
        lock.unlock();
        cancel_abandoned(*ch, id);
        res.status = 499;  // nginx's "client closed request", for the counters
        res.abandon = true;
        return;
      }
    }
    const RequestResult* failed = ch->failed();
    const std::optional<RequestResult> failure =
        failed ? std::optional<RequestResult>(*failed) : std::nullopt;
    std::vector<ChoiceOutput> choices = std::move(ch->choices);
    lock.unlock();
    if (failure) return send_error(res, generation_failed(*failure));
    wait_durable(g);
    if (g.endpoint == Endpoint::Responses)
      return send_json(res, store_response(g, *choices[0].result, choices[0].logprobs));
    const Usage usage = request_usage(choices);
    ordered_json body;
    for (size_t i = 0; i < choices.size(); ++i) {
      ResponseMeta m = meta_of(g);
      m.choice = static_cast<int>(i);
      ordered_json one = choice_json(g, m, *choices[i].result, choices[i].logprobs, usage);
      if (i == 0)
        body = std::move(one);
      else
        body["choices"].push_back(std::move(one["choices"][0]));
    }
    send_json(res, body);
  }

  // A chat or completion response holding one choice (m.choice), with the request's usage.
  ordered_json choice_json(const Generation& g, const ResponseMeta& m, const RequestResult& r,
                           const std::vector<TokenLogprob>& logprobs, const Usage& usage) const {
    if (g.endpoint == Endpoint::Completion)
      return completion_json(
          m, g.echo_prefix + r.text, r.finish, usage,
          wants_logprobs(g) ? completion_logprobs_json(logprobs, piece_of(), g.echo_prefix.size())
                            : ordered_json(nullptr));
    if (g.tools != ToolCallSyntax::None)
      if (ParsedReply reply = parse_tool_calls(g.tools, r.text); !reply.calls.empty())
        return chat_tool_calls_json(m, reply, usage);
    return chat_completion_json(
        m, r.text, r.finish, usage,
        wants_logprobs(g) ? chat_logprobs_json(logprobs, piece_of()) : ordered_json(nullptr));
  }

  static ApiError generation_failed(const RequestResult& r) {
    return ApiError{500,
                    "generation failed: " + (r.error.empty() ? std::string("cancelled") : r.error),
                    "server_error",
                    "",
                    "generation_failed",
                    0};
  }

  // The finished response object of a Responses turn, kept (store: true) before the client sees
  // it, so that a next turn naming it as previous_response_id finds it.
  ordered_json store_response(const Generation& g, const RequestResult& r,
                              const std::vector<TokenLogprob>& logprobs) {
    ResponseState s = g.responses->state;
    finish_response(s, r.finish, r.text, usage_of(r), g.tools);
    if (wants_logprobs(g)) s.logprobs = chat_logprobs_json(logprobs, piece_of())["content"];
    ordered_json body = response_json(s);
    if (s.store) {
      auto link = std::make_shared<ChainLink>();
      link->messages = g.responses->input;
      link->messages.push_back(assistant_turn(s));
      link->before = g.responses->before;
      responses.put(g.owner, s.id, StoredResponse{body, std::move(link)});
    }
    return body;
  }

  // The reply of a Responses turn as the next turn's template sees it: its text, and its calls.
  static ChatMessage assistant_turn(const ResponseState& s) {
    ChatMessage m;
    m.role = "assistant";
    m.content = s.text;
    if (s.calls.empty()) return m;
    m.tool_calls = nlohmann::ordered_json::array();
    for (const ResponseState::Call& c : s.calls) {
      // The server wrote these arguments itself (a parsed call's, or a client's checked ones).
      auto parsed = parse_ordered_json(c.arguments);
      nlohmann::ordered_json args =
          parsed ? std::move(parsed).value() : nlohmann::ordered_json(c.arguments);
      m.tool_calls->push_back({{"id", c.call_id},
                               {"type", "function"},
                               {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
    }
    return m;
  }

  static bool wants_logprobs(const Generation& g) { return g.fields.top_logprobs >= 0; }
  PieceOf piece_of() const {
    return [this](int32_t id) { return tok.token_to_piece(id); };
  }

  // The stream of one choice; with n > 1 its closing carries no usage (the request's follows).
  std::unique_ptr<StreamFormat> stream_format(const Generation& g, int choice) const {
    const PieceOf piece = wants_logprobs(g) ? piece_of() : PieceOf{};
    ResponseMeta m = meta_of(g);
    m.choice = choice;
    const bool usage = g.fields.include_usage && g.fields.n == 1;
    switch (g.endpoint) {
      case Endpoint::Chat:
        return chat_stream(m, usage, g.tools, piece);
      case Endpoint::Completion:
        return completion_stream(m, g.echo_prefix, usage, piece);
      case Endpoint::Responses:
        return responses_stream(g.responses->state, g.tools, piece);
    }
    return nullptr;
  }

  void respond_streaming(const Generation& g, std::shared_ptr<Channel> ch, RequestId id,
                         http::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx: do not buffer the stream
    res.set_stream("text/event-stream", [this, g, ch, id](http::StreamSink& sink) {
      // One format per choice: their chunks carry the choice's index. With n > 1 each choice's
      // closing goes out without [DONE] (and without usage), and the request's usage follows
      // once every choice has closed.
      const size_t n = ch->choices.size();
      std::vector<std::unique_ptr<StreamFormat>> formats;
      for (size_t i = 0; i < n; ++i) formats.push_back(stream_format(g, static_cast<int>(i)));
      auto write = [&](const std::string& s) { return s.empty() || sink.write(s); };
      auto client_gone = [&] { cancel_abandoned(*ch, id); };
      for (auto& f : formats)
        if (!write(f->opening())) return client_gone();
      std::vector<bool> closed(n, false);
      size_t n_closed = 0;
      for (;;) {
        std::vector<std::string> texts(n);
        std::vector<std::vector<TokenLogprob>> logprobs(n);
        std::vector<std::optional<RequestResult>> results(n);
        {
          std::unique_lock lock(ch->mu);
          auto has_news = [&] {
            for (size_t i = 0; i < n; ++i) {
              const ChoiceOutput& c = ch->choices[i];
              if (!closed[i] && (!c.pending.empty() || !c.pending_logprobs.empty() || c.result))
                return true;
            }
            return false;
          };
          const bool woke = ch->cv.wait_for(lock, std::chrono::seconds(1), has_news);
          for (size_t i = 0; i < n; ++i) {
            ChoiceOutput& c = ch->choices[i];
            texts[i].swap(c.pending);
            logprobs[i].swap(c.pending_logprobs);
            if (c.result && !closed[i] && texts[i].empty() && logprobs[i].empty())
              results[i] = c.result;
          }
          if (!woke) {
            lock.unlock();
            // An SSE comment: keeps proxies from timing out and finds clients that left.
            if (!write(": keep-alive\n\n")) return client_gone();
            continue;
          }
        }
        for (size_t i = 0; i < n; ++i)
          if (!texts[i].empty() || !logprobs[i].empty())
            if (!write(formats[i]->text(texts[i], logprobs[i]))) return client_gone();
        for (size_t i = 0; i < n; ++i) {
          const std::optional<RequestResult>& result = results[i];
          if (!result) continue;
          if (result->finish == FinishReason::Error || result->finish == FinishReason::Cancelled) {
            write(formats[i]->failure(generation_failed(*result)));
            if (n > 1) engine.cancel(id);  // the other choices are not wanted without it
            return;
          }
          if (n_closed == 0) wait_durable(g);
          if (g.endpoint == Endpoint::Responses) {
            std::vector<TokenLogprob> all;
            {
              std::lock_guard lock(ch->mu);
              all = ch->choices[i].logprobs;
            }
            store_response(g, *result, all);
          }
          std::string closing =
              formats[i]->closing(result->finish, result->text, usage_of(*result));
          if (n > 1 && closing.ends_with(kSseDone))
            closing.resize(closing.size() - kSseDone.size());
          write(closing);
          closed[i] = true;
          ++n_closed;
        }
        if (n_closed < n) continue;
        if (n > 1) {
          if (g.fields.include_usage) {
            Usage total;
            {
              std::lock_guard lock(ch->mu);
              total = request_usage(ch->choices);
            }
            write(sse_event(g.endpoint == Endpoint::Chat
                                ? chat_usage_chunk_json(meta_of(g), total)
                                : completion_usage_chunk_json(meta_of(g), total)));
          }
          write(std::string(kSseDone));
        }
        return;
      }
    });
  }

  // The client of a running request left: cancel it so its pages come back, and count the
  // disconnect once the engine has confirmed (bounded), so a client that reads /metrics after
  // seeing the disconnect counted also sees the request gone.
  void cancel_abandoned(Channel& ch, RequestId id) {
    engine.cancel(id);
    {
      std::unique_lock lock(ch.mu);
      ch.cv.wait_for(lock, std::chrono::seconds(10), [&] { return ch.done(); });
    }
    metrics.count_client_disconnect();
  }

  void run_generation(Generation& g, const http::Request& req, http::Response& res,
                      Clock::time_point received) {
    // A request refused here leaves no conversation record behind (nor one to evict others).
    auto refuse = [&](const ApiError& e) {
      conversations.abandon(g.owner, g.prompt);
      send_error(res, e);
    };
    if (auto e = check_length(g)) return refuse(*e);
    auto ch = std::make_shared<Channel>(g.fields.n);
    ch->received = received;
    auto submitted = submit(g, ch);
    if (auto* e = std::get_if<ApiError>(&submitted)) return refuse(*e);
    const RequestId id = std::get<RequestId>(submitted);
    res.set_header("X-Session-Id", g.prompt.public_id);
    if (g.fields.stream)
      respond_streaming(g, std::move(ch), id, res);
    else
      respond_blocking(g, ch, id, req, res);
  }

  // The steps both generation endpoints share: ids, the caller, the model and session fields.
  Generation start_generation(Endpoint endpoint, const http::Request& req, http::Response& res) {
    static constexpr const char* kIdPrefix[] = {"chatcmpl-", "cmpl-", "resp_"};
    Generation g;
    g.endpoint = endpoint;
    g.request_id = random_id(kIdPrefix[static_cast<int>(endpoint)]);
    res.set_header("X-Request-Id", g.request_id);
    g.owner = *owner_of(req);  // the pre-routing handler has checked it
    g.model = opt.model_name;
    return g;
  }

  std::optional<ApiError> take_fields(Generation& g, GenerationFields fields,
                                      const http::Request& req) {
    g.fields = std::move(fields);
    if (auto e = check_model(g.fields.model)) return e;
    return session_from(req, g.fields);
  }

  // Renders messages through the chat template and finds the conversation the prompt continues.
  // extra: template variables beyond the messages (e.g. tools).
  std::optional<ApiError> render_and_resolve(Generation& g,
                                             const std::vector<ChatMessage>& messages,
                                             const nlohmann::json& extra = {}) {
    const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
    // Control-token texts inside the messages stay text: only the template's markup is parsed.
    auto chat = tmpl.render_protected(messages, /*add_generation_prompt=*/true, bos, eos,
                                      tok.parse_special_texts(), extra);
    if (!chat)
      return bad_request("the chat template failed on these messages: " + chat.message(),
                         g.prompt_field(), "template_error");
    g.history_text = chat->text;
    // The template writes BOS and the special tokens itself.
    return conversations.resolve_text(g.owner, g.fields.session_id, chat->text,
                                      /*add_special=*/false, tok, g.prompt, chat->protected_ranges);
  }

  // Tools given (and tool_choice not "none"): the template renders them and the reply is parsed
  // for calls in the template's syntax; a template that shows none refuses them.
  std::optional<ApiError> take_tools(Generation& g, const nlohmann::json& tools,
                                     nlohmann::json& extra) const {
    if (tools.empty()) return std::nullopt;
    if (tool_syntax == ToolCallSyntax::None)
      return bad_request(
          "this model's chat template takes no tools (it shows no tool-call syntax); serve it with "
          "--chat-template FILE of a template that does",
          "tools", "unsupported_parameter");
    g.tools = tool_syntax;
    extra["tools"] = tools;
    return std::nullopt;
  }

  // The grammar the output is held to: a forced tool call in the template's syntax (after
  // take_tools), or the response format; both at once are refused.
  std::optional<ApiError> take_constraint(Generation& g, const ToolChoice& choice,
                                          const nlohmann::json& tools, bool parallel) const {
    const char* format_field =
        g.endpoint == Endpoint::Responses ? "text.format" : "response_format";
    GrammarOrError made;
    if (choice.mode != ToolChoice::Mode::Auto) {
      if (g.fields.format)
        return bad_request(
            fmt::format(
                "'{}' cannot be combined with a forced tool call ('tool_choice' \"required\" "
                "or a named function)",
                format_field),
            "tool_choice", "invalid_value");
      made = tool_call_grammar(g.tools, tools, choice, parallel);
    } else if (g.fields.format) {
      made = output_format_grammar(*g.fields.format, format_field);
    } else {
      return std::nullopt;
    }
    if (auto* e = std::get_if<ApiError>(&made)) return *e;
    g.grammar = std::get<std::shared_ptr<const OutputGrammar>>(made);
    return std::nullopt;
  }

  void handle_chat(const http::Request& req, http::Response& res) {
    const auto received = Clock::now();
    Generation g = start_generation(Endpoint::Chat, req, res);
    auto parsed = parse_chat_request(req.body, defaults);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    auto& cr = std::get<ChatCompletionRequest>(parsed);
    if (auto e = take_fields(g, std::move(cr.gen), req)) return send_error(res, *e);
    nlohmann::json extra;
    if (auto e = take_tools(g, cr.tools, extra)) return send_error(res, *e);
    if (auto e = take_constraint(g, cr.tool_choice, cr.tools, cr.parallel_tool_calls))
      return send_error(res, *e);
    if (auto e = render_and_resolve(g, cr.messages, extra)) return send_error(res, *e);
    run_generation(g, req, res, received);
  }

  ApiError response_not_found(const std::string& id) const {
    return ApiError{404,
                    fmt::format("no stored response '{}' for this API key", id),
                    "invalid_request_error",
                    "response_id",
                    "response_not_found",
                    0};
  }

  // POST /v1/responses: a chat turn after the stored chain of previous_response_id. The prompt
  // is rendered from the whole chain, so its KV is found by the conversation it extends.
  void handle_responses(const http::Request& req, http::Response& res) {
    const auto received = Clock::now();
    Generation g = start_generation(Endpoint::Responses, req, res);
    auto parsed = parse_responses_request(req.body, defaults);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    auto& rr = std::get<ResponsesRequest>(parsed);
    if (auto e = take_fields(g, std::move(rr.gen), req)) return send_error(res, *e);
    ResponsesTurn turn;
    if (!rr.previous_response_id.empty()) {
      std::optional<StoredResponse> previous = responses.get(g.owner, rr.previous_response_id);
      if (!previous) {
        ApiError e = response_not_found(rr.previous_response_id);
        e.param = "previous_response_id";
        return send_error(res, e);
      }
      turn.before = previous->history;
    }
    std::vector<ChatMessage> messages;
    if (!rr.instructions.empty())
      messages.push_back(ChatMessage{"system", rr.instructions, {}, {}, {}, {}});
    for (ChatMessage& m : chain_messages(turn.before)) messages.push_back(std::move(m));
    messages.insert(messages.end(), rr.input.begin(), rr.input.end());
    nlohmann::json extra;
    if (auto e = take_tools(g, rr.tools, extra)) return send_error(res, *e);
    if (auto e = take_constraint(g, rr.tool_choice, rr.tools, rr.parallel_tool_calls))
      return send_error(res, *e);
    if (auto e = render_and_resolve(g, messages, extra)) return send_error(res, *e);
    ResponseState& s = turn.state;
    s.id = g.request_id;
    s.message_id = random_id("msg_");
    s.created_at = unix_now();
    s.model = g.model;
    s.instructions = rr.instructions;
    s.previous_response_id = rr.previous_response_id;
    s.max_output_tokens = rr.max_output_tokens;
    s.temperature = g.fields.params.temperature;
    s.top_p = g.fields.params.top_p;
    s.top_logprobs = rr.top_logprobs;
    s.store = rr.store;
    s.metadata = std::move(rr.metadata);
    if (!rr.text_format.is_null()) s.text_format = rr.text_format;
    s.session_id = g.prompt.public_id;
    turn.input = std::move(rr.input);
    g.responses = std::move(turn);
    run_generation(g, req, res, received);
  }

  void handle_get_response(const http::Request& req, http::Response& res) {
    const std::string& id = req.params.at(0);
    std::optional<StoredResponse> r =
        valid_response_id(id) ? responses.get(*owner_of(req), id) : std::nullopt;
    if (!r) return send_error(res, response_not_found(id));
    send_json(res, r->body);
  }

  // Deletes the stored response only: the conversation's KV stays for the rest of its chain.
  void handle_delete_response(const http::Request& req, http::Response& res) {
    const std::string& id = req.params.at(0);
    if (!valid_response_id(id) || !responses.erase(*owner_of(req), id))
      return send_error(res, response_not_found(id));
    send_json(res, ordered_json{{"id", id}, {"object", "response"}, {"deleted", true}});
  }

  void handle_completion(const http::Request& req, http::Response& res) {
    const auto received = Clock::now();
    Generation g = start_generation(Endpoint::Completion, req, res);
    auto parsed = parse_completion_request(req.body, defaults);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    auto& cr = std::get<CompletionRequest>(parsed);
    if (auto e = take_fields(g, std::move(cr.gen), req)) return send_error(res, *e);
    if (auto e = take_constraint(g, ToolChoice{}, nlohmann::json::array(), false))
      return send_error(res, *e);
    if (auto* text = std::get_if<std::string>(&cr.prompt)) {
      // A completion prompt gets a BOS where the vocabulary asks for one, as llama.cpp does.
      g.history_text = *text;
      if (cr.echo) g.echo_prefix = *text;
      if (auto e = conversations.resolve_text(g.owner, g.fields.session_id, *text,
                                              /*add_special=*/true, tok, g.prompt))
        return send_error(res, *e);
    } else {
      auto& ids = std::get<std::vector<int32_t>>(cr.prompt);
      if (cr.echo) g.echo_prefix = tok.decode(ids, /*skip_special=*/false);
      if (auto e =
              conversations.resolve_tokens(g.owner, g.fields.session_id, std::move(ids), g.prompt))
        return send_error(res, *e);
    }
    run_generation(g, req, res, received);
  }

  // ---- the rest ------------------------------------------------------------------------------

  void handle_models(const http::Request&, http::Response& res) {
    ordered_json m;
    m["id"] = opt.model_name;
    m["object"] = "model";
    m["created"] = unix_now();
    m["owned_by"] = "tangram";
    m["context_length"] = engine.context();
    send_json(res, ordered_json{{"object", "list"}, {"data", ordered_json::array({m})}});
  }

  void handle_sessions(const http::Request& req, http::Response& res) {
    const std::string owner = *owner_of(req);
    const std::vector<ConversationInfo> list = conversations.list(owner);
    std::vector<SessionTiers::Location> where(list.size());
    engine.run_on_worker([&](Scheduler& s) {
      for (size_t i = 0; i < list.size(); ++i)
        where[i] = s.session_location(Conversations::engine_key(owner, list[i].id));
    });
    ordered_json data = ordered_json::array();
    for (size_t i = 0; i < list.size(); ++i) {
      const ConversationInfo& c = list[i];
      ordered_json j;
      j["id"] = c.id;
      j["object"] = "session";
      // turns: null for a restored conversation (its count is unknown).
      j["turns"] = c.turns >= 0 ? ordered_json(c.turns) : ordered_json(nullptr);
      if (c.turns < 0) j["restored"] = true;
      j["tokens"] = c.tokens;
      j["created"] = c.created_unix;
      j["last_used"] = c.last_used_unix;
      // Where its KV is (running, resident, host, disk, redis, none: recomputed), and the pool
      // pages it holds or its serialised size in that tier.
      j["tier"] = where[i].tier;
      j["kv_bytes"] = where[i].bytes;
      data.push_back(std::move(j));
    }
    send_json(res, ordered_json{{"object", "list"}, {"data", data}});
  }

  void handle_delete_session(const http::Request& req, http::Response& res) {
    const std::string owner = *owner_of(req);
    const std::string id = req.params.at(0);
    if (!conversations.erase(owner, id))
      return send_error(
          res, ApiError{404, fmt::format("session '{}' is not available to this API key", id),
                        "invalid_request_error", "session_id", "session_not_found", 0});
    // The erase queued the engine's drop (a turn still running is cancelled, every page freed,
    // every tier's copy erased); the answer waits for it, so the delete is final once answered.
    engine.wait_tasks();
    send_json(res, ordered_json{{"id", id}, {"object", "session"}, {"deleted", true}});
  }

  // llama.cpp's helpers: what the model's tokenizer and template make of a text or messages.
  void handle_tokenize(const http::Request& req, http::Response& res) {
    auto parsed = parse_tokenize_request(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    const auto& r = std::get<TokenizeRequest>(parsed);
    const std::vector<int32_t> ids = tok.encode(r.content, r.add_special, r.parse_special);
    ordered_json tokens = ordered_json::array();
    for (int32_t id : ids) {
      if (!r.with_pieces) {
        tokens.push_back(id);
        continue;
      }
      // A piece that is not valid UTF-8 on its own (part of a character) is given as its bytes.
      const std::string piece = tok.token_to_piece(id);
      ordered_json bytes = ordered_json::array();
      for (unsigned char b : piece) bytes.push_back(b);
      tokens.push_back(
          ordered_json{{"id", id}, {"piece", utf8_is_valid(piece) ? ordered_json(piece) : bytes}});
    }
    send_json(res, ordered_json{{"tokens", tokens}});
  }

  void handle_detokenize(const http::Request& req, http::Response& res) {
    auto parsed = parse_detokenize_request(req.body, tok.n_vocab());
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    send_json(res, ordered_json{
                       {"content", tok.decode(std::get<DetokenizeRequest>(parsed).tokens, false)}});
  }

  void handle_apply_template(const http::Request& req, http::Response& res) {
    auto parsed = parse_chat_request(req.body, defaults);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
    const auto& cr = std::get<ChatCompletionRequest>(parsed);
    nlohmann::json extra;
    if (!cr.tools.empty()) extra["tools"] = cr.tools;
    auto text = tmpl.render(cr.messages, /*add_generation_prompt=*/true, bos, eos, extra);
    if (!text)
      return send_error(res,
                        bad_request("the chat template failed on these messages: " + text.message(),
                                    "messages", "template_error"));
    send_json(res, ordered_json{{"prompt", *text}});
  }

  void handle_metrics(const http::Request&, http::Response& res) {
    res.set_content(metrics.scrape(engine.stats(), pending.load()),
                    "text/plain; version=0.0.4; charset=utf-8");
  }

  // Answers every request on its head, before its body is read: ambiguous headers, the Host it
  // names, the API key, and the body's media type.
  bool check_request(const http::Request& req, http::Response& res) {
    for (const char* once : {"Authorization", "X-Session-Id", "Content-Type"})
      if (req.header_count(once) > 1) {
        send_error(
            res, bad_request(fmt::format("the request carries the header {} more than once", once),
                             "", "ambiguous_header"));
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
                   "invalid_request_error", "", "host_not_allowed", 0});
      return true;
    }
    if (!open_path(req.path) && !owner_of(req)) {
      send_error(
          res,
          ApiError{
              401,
              "missing or invalid API key: send the header 'Authorization: Bearer <key>' with a "
              "key given to the server's --api-key",
              "invalid_request_error", "", "invalid_api_key", 0});
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
              "invalid_request_error", "", "unsupported_media_type", 0});
      return true;
    }
    return false;
  }

  // The body of an error the HTTP core answers by itself (no route, a limit, a timeout).
  void fill_core_error(const http::Request& req, http::Response& res, const std::string& message) {
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
    send_error(
        res, ApiError{status, message, status >= 500 ? "server_error" : "invalid_request_error", "",
                      code, retry});
  }

  // Counted before the response is written, so a client that reads /metrics next sees it.
  void count_and_log(const http::Request& req, const http::Response& res) {
    metrics.count_response(route_label(req.path), res.status);
    const bool generation = req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
                            req.path == "/v1/responses";
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

  void install_routes() {
    using http::Lane;
    http.set_head_check(
        [this](const http::Request& req, http::Response& res) { return check_request(req, res); });
    http.set_after(
        [this](const http::Request& req, const http::Response& res) { count_and_log(req, res); });
    http.set_error_filler(
        [this](const http::Request& req, http::Response& res, const std::string& message) {
          fill_core_error(req, res, message);
        });
    // Generations may run (and stream) for minutes: they get the work lane; everything else is
    // answered from the control lane, so health checks and metrics never wait behind them.
    http.route("POST", "/v1/chat/completions", Lane::Work,
               [this](auto& req, auto& res) { handle_chat(req, res); });
    http.route("POST", "/v1/completions", Lane::Work,
               [this](auto& req, auto& res) { handle_completion(req, res); });
    http.route("POST", "/v1/responses", Lane::Work,
               [this](auto& req, auto& res) { handle_responses(req, res); });
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
        return send_error(res, ApiError{503, "the server is starting or stopping", "server_error",
                                        "", "not_ready", 0});
      send_json(res, ordered_json{{"status", "ready"}, {"model", opt.model_name}});
    });
    http.route("GET", "/metrics", Lane::Control,
               [this](auto& req, auto& res) { handle_metrics(req, res); });
    http.route("GET", "/", Lane::Control, [](auto&, auto& res) {
      res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
    });
    http.route("GET", "/favicon.ico", Lane::Control, [](auto&, auto& res) { res.status = 204; });
  }
};

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
