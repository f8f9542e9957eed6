// The `tangram` subcommands' option structs and entry points. Each command lives in its own
// cmd_*.cpp, which also declares its flags (register_* in command.h) and returns the process
// exit code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/bench_options.h"
#include "cli/bench_report.h"
#include "cli/engine_flags.h"
#include "profiling/profiler.h"
#include "runtime/sampling_params.h"

namespace tangram::cli {

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
  EngineFlags engine;  // KV memory, page geometry, threads, context: as chat and serve
  bool quiet = false;  // only the generated text, no statistics
};
int cmd_run(const RunOptions& opt);

struct ChatOptions {
  std::string model;
  std::string system;         // optional system message
  std::string chat_template;  // override: a builtin name (chatml, llama3, llama2) or a file
  SamplingParams sampling;
  int max_tokens = 512;  // per answer
  EngineFlags engine;
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
  std::string log_level = "info";
  SamplingParams sampling;  // defaults of requests that set nothing
  EngineFlags engine;
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

struct BenchModelOptions {
  std::string model;  // benchmark this file; empty: generate from preset/types
  std::string preset = "qwen3-4b-attn";
  std::vector<std::string> types{"f32", "q8_0", "q4_k"};
  int prompt_tokens = 256;
  int gen_tokens = 32;
  int threads = 0;
  std::optional<int> reps;       // --reps; unset: reps_of()
  std::string cache_dir;         // where generated models are kept between runs
  bool llama_cpp = true;         // run llama.cpp (tools/oracle) on the same file alongside
  std::vector<int> concurrency;  // also decode this many sequences at once through the engine
                                 // (continuous batching)
  // > 0: the --concurrency runs are KV-bound decode instead: every sequence's cache filled to this
  // many positions with synthetic KV written straight into its pages, under every --policies
  // (bench_kv_bound.h).
  int64_t context = 0;
  std::vector<std::string> policies{"full", "uniform", "dynamic", "tangram"};
  double kv_ratio = 0.25;  // retention of the compressing policies in --context runs
  std::string profile;     // per-head profile for dynamic/tangram (default: the real Qwen3-4B one)
  std::vector<std::string> kv_types{"f16"};  // page types of the --context runs (f16, f32, q8_0)
  int page_tokens = 16;       // P of the --context runs' pages (the engine's default)
  std::optional<int> rounds;  // --rounds (--context runs timed this many times); unset: rounds_of()
  bool mmap = false;          // weights through the file's memory map, not copied (--mmap)
  ReportOutput output;        // -o DIR (nothing written by default), --json
  bool quick = false;         // fewer layers and tokens: a run of well under a minute
};
// Repetitions of the forward-pass figures and rounds of the --context runs: as given, else 2 and
// 3 (1 and 1 with --quick: it lowers only what was not asked for).
int reps_of(const BenchModelOptions& opt);
int rounds_of(const BenchModelOptions& opt);
// Refuses --policies, --kv-ratio, --profile, --kv-type, --page-tokens and --rounds without
// --context, unknown policies and KV types, and ratios outside (0, 1].
Status check_bench_model_flags(const BenchModelOptions& opt);
// The forward pass: prefill and decode tok/s against the memory-bandwidth ceiling and llama.cpp,
// and (--concurrency) decode throughput against the number of sequences batched together.
int cmd_bench_model(const BenchModelOptions& opt);

struct ClusterOptions {
  std::string profile;  // retention profile (tangram-profile-json/v1)
  int group_size = 4;   // G, heads per page group
  std::string scope;    // per-layer | global; empty: from the profile's level
  std::string out;      // write the chosen cluster map here
};
// Head-group clustering of a retention profile: waste of contiguous vs clustered grouping at
// several group sizes, the profile's stability, and the chosen map.
int cmd_cluster(const ClusterOptions& opt);

struct BenchServeOptions {
  std::string url;  // drive this server; empty: start one in process
  std::string
      api_key;        // sent as "Authorization: Bearer KEY" (and required by the in-process server)
  std::string model;  // a GGUF (its tokenizer re-encodes answers); empty: the generated model
  std::string preset = "qwen3-4b-attn";
  std::string type = "q8_0";
  int layers = 8;  // layers of the generated model (its attention shape is the preset's)
  std::string cache_dir;
  std::string workload = "sharegpt";  // a workload preset, "-quick" variants included
  int conversations = 0, turns = 0;   // overrides (0: the preset's)
  uint64_t seed = 1;
  std::vector<double> rates;  // new conversations per second, open loop; empty: the default list
  int max_retries = 8;        // 429 retries per request
  double timeout_s = 600;     // per request
  int max_queue = 64;         // in-process server: requests waiting beyond the running ones
  bool quick = false;
  ReportOutput output{"bench-serve-out", false};  // -o DIR, --json
  EngineFlags engine;
  // --soak: a `tangram serve` child driven for this long (bench_soak.h); "" = the rate benchmark.
  std::string soak;
  std::string soak_restart_every;  // "" = a eighth of --soak; "0" = never
  std::string soak_sample = "5s";  // RSS and /metrics every this often
  std::string soak_rss_growth =
      "64MiB";                     // allowed RSS growth of one server's life after its warm-up
  std::vector<std::string> given;  // the long names of the options on the command line
  std::vector<std::string> engine_args;  // the engine options given, as words for the child server
};
// The HTTP serving benchmark: multi-turn clients against `tangram serve` (or any
// OpenAI-compatible server) at increasing request rates, session reuse on and off.
int cmd_bench_serve(const BenchServeOptions& opt);
// The flags that do not apply to what was asked (--soak's, the in-process server's with --url).
Status check_bench_serve_flags(const BenchServeOptions& opt);

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
  EngineFlags engine;              // -c/--ctx is the window; the KV policy flags act as in serving
  std::vector<std::string> given;  // long names of the options on the command line
};
// Teacher-forced perplexity of a text under a KV policy (with KL from full KV and the
// retention reached when the policy compresses).
int cmd_perplexity(const PerplexityCmdOptions& opt);

}  // namespace tangram::cli
