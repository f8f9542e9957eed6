#include "server/http_server_impl.h"

namespace tangram::server {

ordered_json HttpServer::Impl::store_response(const Generation& g, const RequestResult& r,
                                              const std::vector<TokenLogprob>& logprobs) {
  ResponseState s = g.responses->state;
  finish_response(s, r.finish, r.text, usage_of(g, r), g.tools);
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

ChatMessage HttpServer::Impl::assistant_turn(const ResponseState& s) {
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

ApiError HttpServer::Impl::response_not_found(const std::string& id) const {
  return ApiError{404,
                  fmt::format("no stored response '{}' for this API key", id),
                  "invalid_request_error",
                  "response_id",
                  "response_not_found",
                  0};
}

void HttpServer::Impl::handle_responses(const http::Request& req, http::Response& res) {
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
  g.may_drop = rr.truncate;
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
  s.truncation = rr.truncate ? "auto" : "disabled";
  s.metadata = std::move(rr.metadata);
  if (!rr.text_format.is_null()) s.text_format = rr.text_format;
  s.session_id = g.prompt.public_id;
  turn.input = std::move(rr.input);
  g.responses = std::move(turn);
  run_generation(g, req, res, received);
}

void HttpServer::Impl::handle_get_response(const http::Request& req, http::Response& res) {
  const std::string& id = req.params.at(0);
  std::optional<StoredResponse> r =
      valid_response_id(id) ? responses.get(*owner_of(req), id) : std::nullopt;
  if (!r) return send_error(res, response_not_found(id));
  send_json(res, r->body);
}

void HttpServer::Impl::handle_delete_response(const http::Request& req, http::Response& res) {
  const std::string& id = req.params.at(0);
  if (!valid_response_id(id) || !responses.erase(*owner_of(req), id))
    return send_error(res, response_not_found(id));
  send_json(res, ordered_json{{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace tangram::server
