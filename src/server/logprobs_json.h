// Log-probabilities in OpenAI's two shapes: chat's logprobs.content entries and the legacy
// completions object. A token's text is its piece; `bytes` gives its exact bytes (a piece may
// be part of a UTF-8 character). A probability of zero is reported as -9999, as OpenAI does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/logprobs.h"

namespace tangram::server {

using PieceOf = std::function<std::string(int32_t)>;

// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}],
// "refusal": null}
nlohmann::ordered_json chat_logprobs_json(std::span<const TokenLogprob> tokens,
                                          const PieceOf& piece);

// {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}], "text_offset"}; offsets count
// from `text_offset` (the length of what the response's text holds before these tokens).
nlohmann::ordered_json completion_logprobs_json(std::span<const TokenLogprob> tokens,
                                                const PieceOf& piece, size_t text_offset);

}  // namespace tangram::server
