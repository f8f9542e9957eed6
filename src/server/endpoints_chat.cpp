#include "server/http_server_impl.h"

namespace tangram::server {

void HttpServer::Impl::handle_chat(const http::Request& req, http::Response& res) {
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
  g.may_drop = opt.context_overflow != ContextOverflow::Refuse;
  if (auto e = render_and_resolve(g, cr.messages, extra)) return send_error(res, *e);
  run_generation(g, req, res, received);
}

void HttpServer::Impl::handle_completion(const http::Request& req, http::Response& res) {
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

}  // namespace tangram::server
