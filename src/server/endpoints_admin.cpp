#include "server/http_server_impl.h"

namespace tangram::server {

void HttpServer::Impl::handle_models(const http::Request&, http::Response& res) {
  ordered_json m;
  m["id"] = opt.model_name;
  m["object"] = "model";
  m["created"] = unix_now();
  m["owned_by"] = "tangram";
  m["context_length"] = engine.context();
  send_json(res, ordered_json{{"object", "list"}, {"data", ordered_json::array({m})}});
}

void HttpServer::Impl::handle_tokenize(const http::Request& req, http::Response& res) {
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

void HttpServer::Impl::handle_detokenize(const http::Request& req, http::Response& res) {
  auto parsed = parse_detokenize_request(req.body, tok.n_vocab());
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  send_json(res, ordered_json{
                     {"content", tok.decode(std::get<DetokenizeRequest>(parsed).tokens, false)}});
}

void HttpServer::Impl::handle_apply_template(const http::Request& req, http::Response& res) {
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

void HttpServer::Impl::handle_metrics(const http::Request&, http::Response& res) {
  res.set_content(metrics.scrape(engine.stats(), pending.load()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace tangram::server
