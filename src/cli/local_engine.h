// The in-process engine that `run` and `chat` drive, and the throughput figures they print
// after each request.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/engine_flags.h"
#include "common/result.h"
#include "engine/engine.h"
#include "launch/model_loading.h"

namespace tangram::cli {

struct LocalEngine {
  LoadedModel loaded;  // declared first: the engine refers to its model and tokenizer
  std::unique_ptr<Engine> engine;
};

// Loads the GGUF model at model_path with the threads and batch size the engine flags ask for,
// and starts an Engine over it with those flags.
Result<LocalEngine> start_local_engine(const std::string& model_path, const EngineSettings& flags);

struct GenerationRates {
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
};

// Tokens per second of one finished request: prefill over prefilled_tokens (the prompt less what
// a session already held), decode over the tokens after the first, which comes from the prefill
// logits.
GenerationRates generation_rates(const RequestResult& r, int64_t prefilled_tokens);

}  // namespace tangram::cli
