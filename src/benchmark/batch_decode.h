// `tangram bench-model --concurrency LIST`: how decode throughput grows with the number of
// sequences decoded together (continuous batching through the engine). For each concurrency c,
// c requests with distinct random prompts are submitted at once to one engine; every token's
// arrival time is recorded. The steady-state window runs from the moment the last sequence
// produced its first token (all c are decoding) to the moment the first sequence finished;
// tokens inside it over its length are the decode tok/s at c. Each step streams the weights once
// for all c sequences plus every sequence's KV, so the table converts tok/s into those bytes per
// second against the machine's measured read bandwidth.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/svg_plot.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::bench {

struct BatchDecodeLevel {
  int concurrency = 0;
  double decode_tok_s = 0;      // steady state, all sequences decoding
  double e2e_tok_s = 0;         // generated tokens / wall time from submission to the last finish
  double step_ms = 0;           // one decode step (c tokens)
  double decode_tok_s_cpu = 0;  // the window's tokens per CPU-second of the process (all threads)
  double step_cpu_ms = 0;       // CPU time of one decode step, all threads together
  double weight_gbps = 0;       // weights streamed per second (once per step)
  double kv_gbps = 0;           // KV read per second (each token reads its sequence's KV)
  double peak_fraction = 0;     // (weights + KV) / measured read bandwidth
  int64_t preemptions = 0;
};

struct BatchDecode {
  std::string label;              // the model's row label
  double kv_bytes_per_token = 0;  // f16 KV of all layers
  int page_tokens = 0;
  int threads = 0;
  std::vector<BatchDecodeLevel> levels;
};

struct BatchDecodeOptions {
  std::vector<int> concurrency;
  int prompt_tokens = 0;
  int gen_tokens = 0;
  int threads = 0;
  double peak_gbps = 0;  // the measured read bandwidth
};

// Errors: a concurrency below 1, an engine that cannot be built, a request that fails, or no
// steady decode window (too few generated tokens).
Result<BatchDecode> measure_batch_decode(Model& model, const Tokenizer& tok,
                                         const std::string& label, const BatchDecodeOptions& opt);
void print_batch_decode(const BatchDecode& b, std::FILE* console);
nlohmann::json batch_decode_json(const BatchDecode& b);
// Decode tok/s against concurrency, one series per model.
LinePlot batch_decode_plot(const std::vector<BatchDecode>& runs);

}  // namespace tangram::bench
