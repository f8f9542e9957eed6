#include "server/http_server_impl.h"

namespace tangram::server {

void HttpServer::Impl::handle_messages(const http::Request& req, http::Response& res) {
  const auto received = Clock::now();
  Generation g = start_generation(Endpoint::Messages, req, res);
  auto fail = [&](const ApiError& e) { send_error(res, e, ErrorShape::Anthropic); };
  auto parsed = parse_messages_request(req.body, defaults);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(*e);
  auto& mr = std::get<MessagesRequest>(parsed);
  if (auto e = take_fields(g, std::move(mr.gen), req)) return fail(*e);
  nlohmann::json extra;
  if (auto e = take_tools(g, mr.tools, extra)) return fail(*e);
  if (auto e = take_constraint(g, mr.tool_choice, mr.tools, mr.parallel_tool_calls))
    return fail(*e);
  g.may_drop = opt.context_overflow != ContextOverflow::Refuse;
  if (auto e = render_and_resolve(g, mr.messages, extra)) return fail(*e);
  run_generation(g, req, res, received);
}

void HttpServer::Impl::handle_count_tokens(const http::Request& req, http::Response& res) {
  auto fail = [&](const ApiError& e) { send_error(res, e, ErrorShape::Anthropic); };
  auto parsed = parse_messages_request(req.body, defaults, /*count_only=*/true);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(*e);
  auto& mr = std::get<MessagesRequest>(parsed);
  if (auto e = check_model(mr.gen.model)) return fail(*e);
  Generation g;  // for take_tools: how the tools reach the prompt
  nlohmann::json extra;
  if (auto e = take_tools(g, mr.tools, extra)) return fail(*e);
  auto chat = render_chat(mr.messages, extra, g.generic_tools);
  if (!chat)
    return fail(bad_request("the chat template failed on these messages: " + chat.message(),
                            "messages", "template_error"));
  const std::vector<int32_t> ids = tok.encode(chat->text, /*add_special=*/false,
                                              /*parse_special=*/true, chat->protected_ranges);
  send_json(res, ordered_json{{"input_tokens", ids.size()}});
}

}  // namespace tangram::server
