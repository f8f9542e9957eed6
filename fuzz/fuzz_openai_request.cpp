// Every JSON entry point of the server: arbitrary bytes as the body of /v1/chat/completions (and
// /apply-template, which parses the same), /v1/completions, /v1/responses, /v1/messages (and
// count_tokens), Ollama's /api/chat, /api/generate, /api/show and /api/embed, /v1/embeddings,
// /tokenize and /detokenize, and as a model's reply parsed for tool calls in every syntax. The
// regressions (fuzz/regressions/openai_request) hold bodies nesting 20,000 to 100,000 deep through
// each place the outside probe crashed the server; the corpus holds deep and wide seeds. A body is
// either refused with an ApiError (whose JSON the server must be able to send) or parsed into a
// request whose values the engine accepts without further checks; a parsed chat request is rendered
// with a built-in template, as the server does next.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "fuzz_support.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/embeddings_request.h"
#include "server/ollama_request.h"
#include "server/ollama_response.h"
#include "server/openai_request.h"
#include "server/responses_request.h"

using namespace tangram;
using namespace tangram::server;

namespace {

void check_error(const ApiError& e) {
  TG_FUZZ_CHECK(e.status >= 400 && e.status < 600);
  TG_FUZZ_CHECK(!e.message.empty());
  // The server sends this body; user bytes quoted in the message may be invalid UTF-8.
  for (const nlohmann::ordered_json& j :
       {nlohmann::ordered_json(error_json(e)), anthropic_error_json(e), ollama_error_json(e)}) {
    const std::string body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    TG_FUZZ_CHECK(!body.empty());
  }
}

void check_fields(const GenerationFields& gen) {
  TG_FUZZ_CHECK(gen.params.validate().ok());
  TG_FUZZ_CHECK(gen.top_logprobs >= -1 && gen.top_logprobs <= 20);
  TG_FUZZ_CHECK(gen.session_id.empty() || valid_session_id(gen.session_id));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ChatTemplate chatml = ChatTemplate::builtin("chatml").value();
  const std::string body(reinterpret_cast<const char*>(data), size);
  RequestDefaults defaults;
  defaults.vocab_size = 512;

  auto chat = parse_chat_request(body, defaults);
  if (const auto* e = std::get_if<ApiError>(&chat)) {
    check_error(*e);
  } else {
    const auto& req = std::get<ChatCompletionRequest>(chat);
    check_fields(req.gen);
    TG_FUZZ_CHECK(!req.messages.empty());
    nlohmann::json extra;
    if (!req.tools.empty()) extra["tools"] = req.tools;
    (void)chatml.render(req.messages, true, "<s>", "</s>", extra);
  }

  auto response = parse_responses_request(body, defaults);
  if (const auto* e = std::get_if<ApiError>(&response)) {
    check_error(*e);
  } else {
    const auto& req = std::get<ResponsesRequest>(response);
    check_fields(req.gen);
    TG_FUZZ_CHECK(!req.input.empty());
    TG_FUZZ_CHECK(req.previous_response_id.empty() || valid_response_id(req.previous_response_id));
    (void)chatml.render(req.input, true, "<s>", "</s>");
  }

  for (const bool count_only : {false, true}) {
    auto messages = parse_messages_request(body, defaults, count_only);
    if (const auto* e = std::get_if<ApiError>(&messages)) {
      check_error(*e);
    } else {
      const auto& req = std::get<MessagesRequest>(messages);
      check_fields(req.gen);
      TG_FUZZ_CHECK(!req.messages.empty());
      TG_FUZZ_CHECK(count_only || req.gen.params.max_tokens > 0);
      nlohmann::json extra;
      if (!req.tools.empty()) extra["tools"] = req.tools;
      (void)chatml.render(req.messages, true, "<s>", "</s>", extra);
    }
  }

  auto ollama_chat = parse_ollama_chat(body, defaults);
  if (const auto* e = std::get_if<ApiError>(&ollama_chat)) {
    check_error(*e);
  } else {
    const auto& req = std::get<OllamaChatRequest>(ollama_chat);
    check_fields(req.gen);
    TG_FUZZ_CHECK(!req.messages.empty() && !req.gen.model.empty());
    (void)chatml.render(req.messages, true, "<s>", "</s>");
  }
  auto ollama_generate = parse_ollama_generate(body, defaults);
  if (const auto* e = std::get_if<ApiError>(&ollama_generate)) {
    check_error(*e);
  } else {
    const auto& req = std::get<OllamaGenerateRequest>(ollama_generate);
    check_fields(req.gen);
    TG_FUZZ_CHECK(req.load_only == req.prompt.empty());
  }
  auto show = parse_ollama_show(body);
  if (const auto* e = std::get_if<ApiError>(&show)) check_error(*e);
  for (bool ollama : {false, true}) {
    auto embed = ollama ? parse_ollama_embed(body) : parse_openai_embeddings(body);
    if (const auto* e = std::get_if<ApiError>(&embed)) {
      check_error(*e);
      continue;
    }
    const auto& req = std::get<EmbeddingsRequest>(embed);
    TG_FUZZ_CHECK(!req.inputs.empty() && req.inputs.size() <= kMaxEmbeddingInputs);
    for (const auto& in : req.inputs) {
      TG_FUZZ_CHECK(in.tokenized() ? in.text.empty() : !in.text.empty());
      TG_FUZZ_CHECK(!ollama || !in.tokenized());
      for (int32_t id : in.ids) TG_FUZZ_CHECK(id >= 0);
    }
  }

  for (auto syntax : {ToolCallSyntax::Hermes, ToolCallSyntax::QwenXml, ToolCallSyntax::Llama3,
                      ToolCallSyntax::MistralJson, ToolCallSyntax::MistralArgs}) {
    const ParsedReply reply = parse_tool_calls(syntax, body);
    for (const auto& call : reply.calls) TG_FUZZ_CHECK(!call.name.empty());
  }
  auto tokenize = parse_tokenize_request(body);
  if (const auto* e = std::get_if<ApiError>(&tokenize)) check_error(*e);
  auto detokenize = parse_detokenize_request(body, defaults.vocab_size);
  if (const auto* e = std::get_if<ApiError>(&detokenize)) {
    check_error(*e);
  } else {
    for (int32_t id : std::get<DetokenizeRequest>(detokenize).tokens)
      TG_FUZZ_CHECK(id >= 0 && id < defaults.vocab_size);
  }
  auto completion = parse_completion_request(body, defaults);
  if (const auto* e = std::get_if<ApiError>(&completion)) {
    check_error(*e);
  } else {
    const auto& req = std::get<CompletionRequest>(completion);
    check_fields(req.gen);
    if (const auto* ids = std::get_if<std::vector<int32_t>>(&req.prompt)) {
      TG_FUZZ_CHECK(!ids->empty());
      for (int32_t id : *ids) TG_FUZZ_CHECK(id >= 0 && id < defaults.vocab_size);
    }
  }
  return 0;
}
