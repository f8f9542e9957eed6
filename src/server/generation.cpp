#include "server/http_server_impl.h"

#include <limits>
#include <map>

namespace tangram::server {

std::optional<ApiError> HttpServer::Impl::check_model(const std::string& model) const {
  if (model.empty() || model == opt.model_name) return std::nullopt;
  return ApiError{
      404,
      fmt::format("the model '{}' does not exist; this server serves '{}' (GET /v1/models)", model,
                  opt.model_name),
      "invalid_request_error",
      "model",
      "model_not_found",
      0};
}

std::optional<ApiError> HttpServer::Impl::session_from(const http::Request& req,
                                                       GenerationFields& f) const {
  const std::string header = req.header("X-Session-Id");
  if (header.empty()) return std::nullopt;
  if (!valid_session_id(header))
    return bad_request("the X-Session-Id header must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                       "session_id", "invalid_session_id");
  if (!f.session_id.empty() && f.session_id != header)
    return bad_request("'session_id' and the X-Session-Id header name different sessions",
                       "session_id", "invalid_session_id");
  f.session_id = header;
  return std::nullopt;
}

std::optional<ApiError> HttpServer::Impl::check_length(const Generation& g) const {
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

ApiError HttpServer::Impl::queue_full() {
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

std::variant<RequestId, ApiError> HttpServer::Impl::submit(const Generation& g,
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
  // Turns the server left out to fit the context: the KV of those it kept moves down rather
  // than being recomputed (the prompt is the held conversation with that range removed).
  r.context_shift = g.dropped_messages > 0 && opt.context_overflow == ContextOverflow::Shift;
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

void HttpServer::Impl::finished(const Generation& g, Channel& ch, const RequestResult& result) {
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

void HttpServer::Impl::record_conversation(const Generation& g, const RequestResult& result) {
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

void HttpServer::Impl::request_done(const Generation& g, Channel& ch, const RequestResult& result) {
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

std::string HttpServer::Impl::recorded_reply(const Generation& g, const std::string& text) const {
  if (g.tools == ToolCallSyntax::None || parse_tool_calls(g.tools, text).calls.empty()) return text;
  return text.substr(0, tool_call_start(g.tools, text).value_or(text.size()));
}

Usage HttpServer::Impl::usage_of(const Generation& g, const RequestResult& r) const {
  return Usage{r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_tokens,
               g.dropped_messages, r.usage.repositioned_tokens};
}

Usage HttpServer::Impl::request_usage(const Generation& g,
                                      const std::vector<ChoiceOutput>& choices) const {
  Usage u = usage_of(g, *choices[0].result);
  for (size_t i = 1; i < choices.size(); ++i)
    u.completion_tokens += choices[i].result->usage.completion_tokens;
  return u;
}

ResponseMeta HttpServer::Impl::meta_of(const Generation& g) const {
  return ResponseMeta{g.request_id, unix_now(), g.model, g.prompt.public_id};
}

OllamaMeta HttpServer::Impl::ollama_meta(const Generation& g) {
  return OllamaMeta{g.endpoint == Endpoint::OllamaChat ? OllamaKind::Chat : OllamaKind::Generate,
                    g.model};
}

MessageMeta HttpServer::Impl::message_meta(const Generation& g) {
  return MessageMeta{g.request_id, g.model, static_cast<int64_t>(g.prompt.tokens.size())};
}

void HttpServer::Impl::wait_durable(const Generation& g) {
  if (!engine.wait_session_written(g.prompt.engine_session, std::chrono::seconds(5)))
    log.write(LogLevel::Warn, "session_write_slow", {{"session", g.prompt.public_id}});
}

void HttpServer::Impl::respond_blocking(const Generation& g, const std::shared_ptr<Channel>& ch,
                                        RequestId id, const http::Request& req,
                                        http::Response& res) {
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
  if (failure) return send_error(res, generation_failed(*failure), g.error_shape());
  wait_durable(g);
  if (g.endpoint == Endpoint::Responses)
    return send_json(res, store_response(g, *choices[0].result, choices[0].logprobs));
  if (g.endpoint == Endpoint::Messages)
    return send_json(res, message_json(message_meta(g), *choices[0].result, g.fields.params.stop,
                                       g.tools, usage_of(g, *choices[0].result)));
  if (g.ollama())
    return send_json(res, ollama_answer(ollama_meta(g), *choices[0].result,
                                        usage_of(g, *choices[0].result), g.tools));
  const Usage usage = request_usage(g, choices);
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

ordered_json HttpServer::Impl::choice_json(const Generation& g, const ResponseMeta& m,
                                           const RequestResult& r,
                                           const std::vector<TokenLogprob>& logprobs,
                                           const Usage& usage) const {
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

ApiError HttpServer::Impl::generation_failed(const RequestResult& r) {
  return ApiError{500,
                  "generation failed: " + (r.error.empty() ? std::string("cancelled") : r.error),
                  "server_error",
                  "",
                  "generation_failed",
                  0};
}

bool HttpServer::Impl::wants_logprobs(const Generation& g) { return g.fields.top_logprobs >= 0; }

PieceOf HttpServer::Impl::piece_of() const {
  return [this](int32_t id) { return tok.token_to_piece(id); };
}

std::unique_ptr<StreamFormat> HttpServer::Impl::stream_format(const Generation& g,
                                                              int choice) const {
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
    case Endpoint::Messages:
      return messages_stream(message_meta(g), g.fields.params.stop, g.tools);
    case Endpoint::OllamaChat:
    case Endpoint::OllamaGenerate:
      return ollama_stream(ollama_meta(g), g.tools);
  }
  return nullptr;
}

void HttpServer::Impl::respond_streaming(const Generation& g, std::shared_ptr<Channel> ch,
                                         RequestId id, http::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: do not buffer the stream
  // Ollama's clients read newline-delimited JSON, where a blank line or a comment is an error:
  // its streams send no keep-alive (a client that left is found at the next write).
  const bool ndjson = g.ollama();
  res.set_stream(
      ndjson ? "application/x-ndjson" : "text/event-stream",
      [this, g, ch, id, ndjson](http::StreamSink& sink) {
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
              if (!ndjson && !write(": keep-alive\n\n")) return client_gone();
              continue;
            }
          }
          for (size_t i = 0; i < n; ++i)
            if (!texts[i].empty() || !logprobs[i].empty())
              if (!write(formats[i]->text(texts[i], logprobs[i]))) return client_gone();
          for (size_t i = 0; i < n; ++i) {
            const std::optional<RequestResult>& result = results[i];
            if (!result) continue;
            if (result->finish == FinishReason::Error ||
                result->finish == FinishReason::Cancelled) {
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
            std::string closing = formats[i]->closing(*result, usage_of(g, *result));
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
                total = request_usage(g, ch->choices);
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

void HttpServer::Impl::cancel_abandoned(Channel& ch, RequestId id) {
  engine.cancel(id);
  {
    std::unique_lock lock(ch.mu);
    ch.cv.wait_for(lock, std::chrono::seconds(10), [&] { return ch.done(); });
  }
  metrics.count_client_disconnect();
}

void HttpServer::Impl::run_generation(Generation& g, const http::Request& req, http::Response& res,
                                      Clock::time_point received) {
  if (g.dropped_messages > 0)
    res.set_header("X-Dropped-Messages", std::to_string(g.dropped_messages));
  // A request refused here leaves no conversation record behind (nor one to evict others).
  auto refuse = [&](const ApiError& e) {
    conversations.abandon(g.owner, g.prompt);
    send_error(res, e, g.error_shape());
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

Generation HttpServer::Impl::start_generation(Endpoint endpoint, const http::Request& req,
                                              http::Response& res) {
  static constexpr const char* kIdPrefix[] = {"chatcmpl-", "cmpl-",   "resp_",
                                              "msg_",      "ollama-", "ollama-"};
  Generation g;
  g.endpoint = endpoint;
  g.request_id = random_id(kIdPrefix[static_cast<int>(endpoint)]);
  res.set_header("X-Request-Id", g.request_id);
  g.owner = *owner_of(req);  // the pre-routing handler has checked it
  g.model = opt.model_name;
  return g;
}

std::optional<ApiError> HttpServer::Impl::take_fields(Generation& g, GenerationFields fields,
                                                      const http::Request& req) {
  g.fields = std::move(fields);
  if (auto e = check_model(g.fields.model)) return e;
  return session_from(req, g.fields);
}

Result<RenderedChat> HttpServer::Impl::render_chat(const std::vector<ChatMessage>& messages,
                                                   const nlohmann::json& extra,
                                                   const nlohmann::json& generic_tools) const {
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  // Control-token texts inside the messages stay text: only the template's markup is parsed.
  return tmpl.render_protected(
      generic_tools.empty() ? messages : with_generic_tools(messages, generic_tools),
      /*add_generation_prompt=*/true, bos, eos, tok.parse_special_texts(), extra);
}

std::optional<ApiError> HttpServer::Impl::fit_context(Generation& g,
                                                      const std::vector<ChatMessage>& messages,
                                                      const nlohmann::json& extra,
                                                      std::optional<RenderedChat>& rendered) const {
  const int64_t ctx = engine.context();
  // Room kept to answer: max_tokens when given (up to half the context), else an eighth of it.
  const int64_t max_tokens = g.fields.params.max_tokens;
  const int64_t reserve =
      std::clamp<int64_t>(max_tokens > 0 ? max_tokens : ctx / 8, 1, std::max<int64_t>(ctx / 2, 1));
  const int64_t budget = ctx - reserve;
  std::map<size_t, std::optional<RenderedChat>> renders;
  std::map<size_t, int64_t> counts;
  auto render = [&](size_t drop) -> const RenderedChat* {
    auto it = renders.find(drop);
    if (it == renders.end()) {
      auto r = render_chat(drop_oldest(messages, drop), extra, g.generic_tools);
      it = renders
               .emplace(drop, r ? std::optional<RenderedChat>(std::move(r).value()) : std::nullopt)
               .first;
    }
    return it->second ? &*it->second : nullptr;
  };
  const RenderedChat* whole = render(0);
  // A template error is render_and_resolve's to report; a prompt of fewer bytes than the budget
  // has fewer tokens than it (the template's control tokens only shorten it), so it fits.
  if (whole == nullptr || static_cast<int64_t>(whole->text.size()) + 2 <= budget) {
    if (whole != nullptr) rendered = *whole;
    return std::nullopt;
  }
  ContextFitProbe probe{
      [&](size_t drop) {
        auto it = counts.find(drop);
        if (it != counts.end()) return it->second;
        const RenderedChat* r = render(drop);
        const int64_t n =
            r == nullptr
                ? std::numeric_limits<int64_t>::max()
                : static_cast<int64_t>(tok.encode(r->text, /*add_special=*/false,
                                                  /*parse_special=*/true, r->protected_ranges)
                                           .size());
        counts.emplace(drop, n);
        return n;
      },
      [&](size_t drop) {
        const RenderedChat* r = render(drop);
        return r != nullptr && conversations.continued_by(g.owner, r->text);
      }};
  // Shift moves the kept turns' KV instead of recomputing it, so the cut can be as small as fits;
  // recomputing, a deep cut (half the context) leaves the next turns room to reuse its KV.
  const int64_t deep =
      opt.context_overflow == ContextOverflow::Shift ? budget : std::min(budget, ctx / 2);
  const auto drop = fit_to_context(messages, budget, deep, probe);
  if (!drop) {
    const std::vector<size_t> cuts = cut_points(messages);
    return bad_request(
        fmt::format("the conversation does not fit the context even without its older turns: "
                    "the system prompt and the last message take {} tokens, and the context "
                    "holds {} with {} kept to answer; shorten the last message or 'max_tokens'",
                    probe.tokens(cuts.back()), ctx, reserve),
        g.prompt_field(), "context_length_exceeded");
  }
  if (const RenderedChat* r = render(*drop)) rendered = *r;
  g.dropped_messages = static_cast<int64_t>(*drop);
  return std::nullopt;
}

std::optional<ApiError> HttpServer::Impl::render_and_resolve(
    Generation& g, const std::vector<ChatMessage>& all_messages, const nlohmann::json& extra) {
  std::optional<RenderedChat> fitted;
  if (g.may_drop)
    if (auto e = fit_context(g, all_messages, extra, fitted)) return e;
  // Without a rendering from the fit (a template error), render to report it.
  auto chat = fitted
                  ? Result<RenderedChat>(std::move(*fitted))
                  : render_chat(drop_oldest(all_messages, static_cast<size_t>(g.dropped_messages)),
                                extra, g.generic_tools);
  if (!chat)
    return bad_request("the chat template failed on these messages: " + chat.message(),
                       g.prompt_field(), "template_error");
  g.history_text = chat->text;
  // The template writes BOS and the special tokens itself.
  return conversations.resolve_text(g.owner, g.fields.session_id, chat->text,
                                    /*add_special=*/false, tok, g.prompt, chat->protected_ranges,
                                    /*shifted=*/g.dropped_messages > 0);
}

std::optional<ApiError> HttpServer::Impl::take_tools(Generation& g, const nlohmann::json& tools,
                                                     nlohmann::json& extra) const {
  if (tools.empty()) return std::nullopt;
  if (tool_syntax == ToolCallSyntax::None) {
    g.tools = ToolCallSyntax::Hermes;  // the syntax generic_tool_prompt() teaches
    g.generic_tools = tools;
    return std::nullopt;
  }
  g.tools = tool_syntax;
  extra["tools"] = tools;
  return std::nullopt;
}

std::optional<ApiError> HttpServer::Impl::take_constraint(Generation& g, const ToolChoice& choice,
                                                          const nlohmann::json& tools,
                                                          bool parallel) const {
  const char* format_field = g.endpoint == Endpoint::Responses ? "text.format" : "response_format";
  GrammarOrError made;
  if (choice.mode != ToolChoice::Mode::Auto) {
    if (g.fields.format)
      return bad_request(
          fmt::format("'{}' cannot be combined with a forced tool call ('tool_choice' \"required\" "
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

}  // namespace tangram::server
