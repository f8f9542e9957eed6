#include "server/logprobs_json.h"

#include <cmath>

namespace tangram::server {
namespace {

using nlohmann::ordered_json;

double reported(float logprob) {
  return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0;
}

ordered_json entry(int32_t id, float logprob, const PieceOf& piece) {
  const std::string text = piece(id);
  ordered_json bytes = ordered_json::array();
  for (unsigned char b : text) bytes.push_back(b);
  return ordered_json{{"token", text}, {"logprob", reported(logprob)}, {"bytes", std::move(bytes)}};
}

}  // namespace

ordered_json chat_logprobs_json(std::span<const TokenLogprob> tokens, const PieceOf& piece) {
  ordered_json content = ordered_json::array();
  for (const TokenLogprob& t : tokens) {
    ordered_json e = entry(t.token, t.logprob, piece);
    ordered_json top = ordered_json::array();
    for (const auto& [id, lp] : t.top) top.push_back(entry(id, lp, piece));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return ordered_json{{"content", std::move(content)}, {"refusal", nullptr}};
}

ordered_json completion_logprobs_json(std::span<const TokenLogprob> tokens, const PieceOf& piece,
                                      size_t text_offset) {
  ordered_json texts = ordered_json::array(), lps = ordered_json::array(),
               tops = ordered_json::array(), offsets = ordered_json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string text = piece(t.token);
    texts.push_back(text);
    lps.push_back(reported(t.logprob));
    ordered_json top = ordered_json::object();
    for (const auto& [id, lp] : t.top) top[piece(id)] = reported(lp);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return ordered_json{{"tokens", std::move(texts)},
                      {"token_logprobs", std::move(lps)},
                      {"top_logprobs", std::move(tops)},
                      {"text_offset", std::move(offsets)}};
}

}  // namespace tangram::server
