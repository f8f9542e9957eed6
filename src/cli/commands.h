// The `tangram` subcommands' option structs and entry points. Each command lives in its own
// cmd_*.cpp, which also declares its flags (register_* in command.h) and returns the process
// exit code; the benchmarks' drivers are in src/benchmark/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "benchmark/model_bench.h"
#include "benchmark/multiturn_bench.h"
#include "benchmark/serve_bench.h"
#include "cli/engine_flags.h"
#include "profiling/profiler.h"
#include "runtime/sampling_params.h"

namespace tangram::cli {

// The benchmark commands' options are the benchmark library's own (src/benchmark/).
using bench::BenchModelOptions;
using bench::BenchOptions;
using bench::BenchServeOptions;

struct InfoOptions {
  std::string model;  // optional with --cpu
  bool full = false;  // every metadata item and tensor, unabridged
  bool cpu = false;   // the CPU's SIMD features and the kernel path this binary runs on it
};
int cmd_info(const InfoOptions& opt);

struct TokenizeOptions {
  std::string model;   // a GGUF (model or vocab-only), or a tokenizer file (see vocab_source.h)
  std::string flavor;  // for tiktoken files: llama3 | qwen2
  std::string text;
  std::string file;  // read the text from this file instead
  bool add_special = false;
  bool parse_special = false;
  bool ids_only = false;
};
int cmd_tokenize(const TokenizeOptions& opt);

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string system;         // --chat: optional system message
  bool chat = false;          // render the chat template around the prompt
  std::string chat_template;  // override: a builtin name (chatml, llama3, llama2) or a file
  SamplingParams sampling;
  int max_tokens = 256;
  EngineSettings engine;  // KV memory, page geometry, threads, context: as chat and serve
  bool quiet = false;     // only the generated text, no statistics
};
int cmd_run(const RunOptions& opt);

struct ChatOptions {
  std::string model;
  std::string system;         // optional system message
  std::string chat_template;  // override: a builtin name (chatml, llama3, llama2) or a file
  SamplingParams sampling;
  int max_tokens = 512;  // per answer
  EngineSettings engine;
  bool quiet = false;  // no per-turn statistics
};
struct ServeOptions {
  std::string model;
  std::string chat_template;  // override: a builtin name or a Jinja file
  std::string model_name;     // id in /v1/models ("" = the file's name without .gguf)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::string api_key_file;                // one key per line ('#' comments)
  std::vector<std::string> allowed_hosts;  // Host names accepted besides IP literals and localhost
  int max_queue = 64;
  int http_threads = 0;
  std::string max_body = "8MiB";
  std::string max_body_in_flight;  // "": 32 x max_body
  int read_timeout_s = 10;
  int write_timeout_s = 30;
  size_t max_connections = 1024;
  size_t max_connections_per_ip = 256;
  size_t max_headers = 100;
  std::string max_header_bytes = "64KiB";
  size_t max_conversations = 10000;
  std::string context_overflow = "shift";
  std::string pooling = "auto";  // embeddings: auto (the GGUF's, else last), mean, cls, last
  std::string log_level = "info";
  SamplingParams sampling;  // defaults of requests that set nothing
  EngineSettings engine;
};
// The OpenAI-compatible HTTP server (runs until SIGINT or SIGTERM).
int cmd_serve(const ServeOptions& opt);

// Interactive multi-turn chat on stdin/stdout; every turn reuses the conversation's resident
// KV, so only the new message is prefilled.
int cmd_chat(const ChatOptions& opt);

struct MkmodelOptions {
  std::string preset;  // tiny-llama | tiny-qwen2 | tiny-qwen3 | qwen3-4b-attn | llama3-8b-attn
  std::string arch;    // override the preset's fields when set / non-zero
  int n_layers = 0, n_embd = 0, n_ff = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
  int64_t vocab = 0, ctx = 0;
  std::string type = "f32";  // f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m
  uint64_t seed = 1;
  bool tied = false;
  bool llama3_rope = false;
  std::string tokenizer;  // embed this vocabulary (GGUF, tokenizer.model or tiktoken file)
  std::string flavor;     // tiktoken flavour
  std::string out;
  int threads = 0;
};
int cmd_mkmodel(const MkmodelOptions& opt);

int cmd_bench(const BenchOptions& opt);
int cmd_bench_model(const BenchModelOptions& opt);
int cmd_bench_serve(const BenchServeOptions& opt);

struct ClusterOptions {
  std::string profile;  // retention profile (tangram-profile-json/v1)
  int group_size = 4;   // G, heads per page group
  std::string scope;    // per-layer | global; empty: from the profile's level
  std::string out;      // write the chosen cluster map here
};
// Head-group clustering of a retention profile: waste of contiguous vs clustered grouping at
// several group sizes, the profile's stability, and the chosen map.
int cmd_cluster(const ClusterOptions& opt);

// The profiler's settings, and the model, text and output file of one run.
struct ProfileOptions : ProfilerSettings {
  std::string model;
  std::vector<std::string>
      samples;  // text files, one per kind of text (JSON lines or "---"-separated)
  std::string out = "profile.json";
  bool mmap = false;  // weights through the file's memory map, not copied (--mmap)
};
// Offline per-head retention profile of a model (for the tangram policy's budgets), with a
// report of how stable the head ordering is across samples, turns and kinds of text.
int cmd_profile(const ProfileOptions& opt);

struct PerplexityCmdOptions {
  std::string model;
  std::string file;                // the text
  int64_t chunk = 128;             // tokens appended per turn (then compressed, as serving does)
  bool json = false;               // the result as JSON on stdout instead of the text lines
  EngineSettings engine;           // -c/--ctx is the window; the KV policy flags act as in serving
  std::vector<std::string> given;  // long names of the options on the command line
};
// Teacher-forced perplexity of a text under a KV policy (with KL from full KV and the
// retention reached when the policy compresses).
int cmd_perplexity(const PerplexityCmdOptions& opt);

struct RecallCmdOptions {
  std::string model;
  std::string set;            // recall conversations (JSONL); "" = the shipped held-out set
  std::string chat_template;  // override: a builtin name or a Jinja file
  int conversations = 0;      // the first N of the set; 0 = all
  int max_answer_tokens = 48;
  bool json = false;  // the result as JSON on stdout
  EngineSettings engine;
};
// Task accuracy of a KV policy: exact recall of facts stated earlier in held-out multi-turn
// conversations, played through the serving engine (evaluation/recall_eval.h), per task kind,
// with the KV retention reached.
int cmd_recall(const RecallCmdOptions& opt);

}  // namespace tangram::cli
