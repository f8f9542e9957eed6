// Embedding requests: OpenAI's POST /v1/embeddings and Ollama's POST /api/embed, read into one
// shape. An input is text (tokenized by the server) or, with OpenAI's API, token ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"

namespace tangram::server {

// Most inputs one request may carry (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingInput {
  std::string text;          // when ids is empty
  std::vector<int32_t> ids;  // token ids given by the client (OpenAI only)
  bool tokenized() const { return !ids.empty(); }
};

struct EmbeddingsRequest {
  std::string model;
  std::vector<EmbeddingInput> inputs;  // at least one
  bool base64 = false;                 // OpenAI encoding_format "base64": float32 LE bytes
  std::optional<int64_t> dimensions;   // the length the client wants (must be the model's)
  // Ollama's "truncate" (default true): an input longer than the context is cut to fit rather
  // than refused. OpenAI's API refuses it.
  bool truncate = false;
};

// {"input": string | [string] | [int] | [[int]], "model", "encoding_format": "float" | "base64",
//  "dimensions", "user"}
std::variant<EmbeddingsRequest, ApiError> parse_openai_embeddings(const std::string& body);
// {"model", "input": string | [string], "truncate", "dimensions", "options", "keep_alive"}
std::variant<EmbeddingsRequest, ApiError> parse_ollama_embed(const std::string& body);

}  // namespace tangram::server
