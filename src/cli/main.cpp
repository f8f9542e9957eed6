// tangram: command-line entry point. Parses arguments (CLI11) and dispatches to cmd_*.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

using namespace tangram::cli;

namespace {

// Sampling flags shared by the commands that generate text.
void add_sampling_options(CLI::App* c, tangram::SamplingParams& s) {
  c->add_option("--temp,--temperature", s.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", s.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--top-p", s.top_p, "Nucleus sampling mass; 1 = off")->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--min-p", s.min_p, "Keep tokens with p >= min_p * p_max; 0 = off")->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty (CTRL style); 1 = off")
      ->capture_default_str();
  c->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty [-2, 2]")->capture_default_str();
  c->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty [-2, 2]")->capture_default_str();
  c->add_option("--penalty-last-n", s.penalty_last_n, "Tokens the penalties look back over; -1 = all")
      ->capture_default_str();
  c->add_option_function<uint64_t>("--seed", [&s](const uint64_t& v) { s.seed = v; s.seed_set = true; },
                                   "Random seed (default: random, printed at the end)");
  c->add_option("--stop", s.stop, "Stop string (repeatable)");
  c->add_flag("--ignore-eos", s.ignore_eos, "Keep generating past end-of-generation tokens");
}

// KV memory and batching flags of the commands that run the serving engine.
void add_engine_options_impl(CLI::App* c, EngineFlags& e);
// Returns them, for a command that passes them on to a child process (bench-serve --soak).
std::vector<CLI::Option*> add_engine_options(CLI::App* c, EngineFlags& e) {
  const size_t before = c->get_options().size();
  add_engine_options_impl(c, e);
  std::vector<CLI::Option*> added = c->get_options();
  added.erase(added.begin(), added.begin() + static_cast<std::ptrdiff_t>(before));
  return added;
}

// The options of `options` given on the command line, as the words that would give them again.
std::vector<std::string> given_as_args(const std::vector<CLI::Option*>& options) {
  std::vector<std::string> words;
  for (const CLI::Option* o : options) {
    if (o->count() == 0) continue;
    const std::string name = o->get_lnames().empty() ? "-" + o->get_snames().front() : "--" + o->get_lnames().front();
    if (o->get_expected_min() == 0) {  // a flag
      words.push_back(name);
      continue;
    }
    for (const std::string& v : o->results()) {
      words.push_back(name);
      words.push_back(v);
    }
  }
  return words;
}

void add_engine_options_impl(CLI::App* c, EngineFlags& e) {
  c->add_option("--kv-memory", e.kv_memory, "KV page arena size, e.g. 512MiB, 2GiB")->capture_default_str();
  c->add_option("--page-tokens", e.page_tokens, "Token slots per KV page (P)")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  c->add_option("--page-group-size", e.page_group_size,
                "KV heads sharing a page (G); 0 = all heads of a layer (unified pages); "
                "-1 = the policy's (tangram 4, the others unified)")
      ->capture_default_str()->check(CLI::Range(-1, 1024));
  c->add_option("--kv-type", e.kv_type, "KV element type")->capture_default_str()
      ->check(CLI::IsMember({"f16", "f32"}));
  c->add_option("--prefill-chunk", e.prefill_chunk, "Most prompt tokens of one sequence per step")
      ->capture_default_str()->check(CLI::Range(1, 65536));
  c->add_option("--step-tokens", e.step_tokens, "Token budget of one batched step")->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("--max-running", e.max_running, "Sequences decoding at once")->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("-c,--ctx", e.ctx, "Positions per conversation (default: the model's context)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("-t,--threads", e.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c->add_option("--kv-host-memory", e.kv_host_memory,
                "Host memory for idle sessions' KV moved out of the pool (restored, not recomputed); 0 = none")
      ->capture_default_str();
  c->add_option("--kv-disk", e.kv_disk,
                "Directory for sessions' KV on disk: written after every turn, read back after a restart");
  c->add_option("--kv-disk-max", e.kv_disk_max, "Size cap of --kv-disk (least recently used deleted first)")
      ->capture_default_str();
  c->add_option("--kv-redis", e.kv_redis,
                "Redis shared by replicas for sessions' KV (host:port or redis://[:password@]host:port/db): "
                "written after every turn, read by whichever replica serves the next one");
  c->add_option("--kv-redis-prefix", e.kv_redis_prefix,
                "Key prefix in --kv-redis (default: tangram:<fingerprint of model and KV policy>:)");
  c->add_option("--kv-redis-ttl", e.kv_redis_ttl, "Expiry of a session in --kv-redis, seconds (0 = none)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--kv-idle-offload", e.kv_idle_offload,
                "Move a session's KV out of the pool to the tiers after this many idle seconds (0 = only when "
                "memory is needed)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--kv-policy", e.kv_policy,
                "KV compression: full (none), uniform, dynamic (run-time budgets), tangram "
                "(deterministic budgets from --kv-profile, head-group pages, ahead-of-time split)")
      ->capture_default_str()->check(CLI::IsMember({"full", "uniform", "dynamic", "tangram"}));
  c->add_option("--kv-scorer", e.kv_scorer,
                "Token scorer: keydiff, kvzip (query-agnostic), snapkv, tova, expected_attention, streamingllm")
      ->capture_default_str();
  c->add_option("--kv-ratio", e.kv_ratio, "Fraction of the context kept (1 = no compression)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  c->add_option("--kv-level", e.kv_level, "How dynamic spreads its budget: uniform, per-layer, cross-layer")
      ->capture_default_str()->check(CLI::IsMember({"uniform", "per-layer", "cross-layer"}));
  c->add_option("--kv-alpha", e.kv_alpha, "Safety coefficient of deterministic budgets (mean + alpha x std)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--kv-sink", e.kv_sink, "First tokens always kept")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--kv-window", e.kv_window, "Most recent tokens always kept")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-chunk", e.kv_chunk, "Long prompts are compressed every this many tokens (bench: 0 = auto)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--kv-profile", e.kv_profile, "Per-head retention profile (tangram policy; `tangram profile` makes one)")
      ->check(CLI::ExistingFile);
  c->add_option("--kv-cluster-map", e.kv_cluster_map, "Head-group map (default: cluster the profile; `tangram cluster`)")
      ->check(CLI::ExistingFile);
  c->add_flag("--kv-first-turn-only", e.kv_first_turn_only,
              "Compress only a conversation's first prefill (as the reference implementation)");
  c->add_option("--snap-window", e.snap_window, "SnapKV observation window")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--snap-kernel", e.snap_kernel, "SnapKV pooling kernel (odd)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--ea-queries", e.ea_queries, "ExpectedAttention: last prompt queries whose statistics are used")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--ea-future", e.ea_future, "ExpectedAttention: future positions averaged")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--ea-epsilon", e.ea_epsilon, "ExpectedAttention: epsilon added to the expected attention")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_flag("--ea-no-covariance", e.ea_no_covariance, "ExpectedAttention: mean query only");
  c->add_flag("--ea-no-value-norm", e.ea_no_value_norm, "ExpectedAttention: do not weight by value norms");
  c->add_option("--attention-split", e.attention_split,
                "Attention work split across threads: auto (the policy's), runtime (planned every step), "
                "naive (one item per head group), aot (balanced, planned ahead of time)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "runtime", "naive", "aot"}));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tangram: a multi-turn LLM serving engine with non-uniform KV compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tangram 0.1.0");

  InfoOptions info;
  auto* c_info = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and sizes");
  c_info->add_option("model", info.model, "GGUF file")->required()->check(CLI::ExistingFile);
  c_info->add_flag("--full", info.full, "List every tensor and full metadata values");

  TokenizeOptions tok;
  auto* c_tok = app.add_subcommand("tokenize", "Turn text into token ids with a model's tokenizer");
  c_tok->add_option("-m,--model", tok.model,
                    "GGUF model or vocab file, SentencePiece tokenizer.model, or tiktoken rank file")
      ->required()->check(CLI::ExistingFile);
  c_tok->add_option("--flavor", tok.flavor, "For tiktoken files: llama3 or qwen2");
  auto* tok_text = c_tok->add_option("-p,--prompt,text", tok.text, "Text to tokenise");
  auto* tok_file = c_tok->add_option("-f,--file", tok.file, "Read the text from a file")->check(CLI::ExistingFile);
  tok_text->excludes(tok_file);
  c_tok->add_flag("--add-special", tok.add_special, "Add BOS/EOS as the vocabulary says");
  c_tok->add_flag("--parse-special", tok.parse_special, "Recognise special-token texts such as <|im_start|>");
  c_tok->add_flag("--ids", tok.ids_only, "Print only the ids, space separated");

  RunOptions run;
  run.sampling.temperature = 0.8f;
  auto* c_run = app.add_subcommand("run", "Generate text from a prompt, streaming to the terminal");
  c_run->add_option("-m,--model", run.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_run->add_option("-p,--prompt", run.prompt, "Prompt text (with --chat: the user message)")->required();
  c_run->add_flag("--chat", run.chat, "Wrap the prompt in the model's chat template");
  c_run->add_option("--system", run.system, "System message (with --chat)");
  c_run->add_option("--chat-template", run.chat_template,
                    "Template to use with --chat: chatml, llama3, llama2, or a Jinja file");
  c_run->add_option("-n,--max-tokens", run.max_tokens, "Tokens to generate at most")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_run->add_option("-t,--threads", run.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_run->add_option("-c,--ctx", run.ctx, "Context length (default: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  c_run->add_option("--kv-type", run.kv_type, "KV cache element type")->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
  c_run->add_flag("-q,--quiet", run.quiet, "Print only the generated text");
  add_sampling_options(c_run, run.sampling);

  ChatOptions chat;
  chat.sampling.temperature = 0.8f;
  auto* c_chat = app.add_subcommand(
      "chat", "Interactive multi-turn chat; each turn reuses the conversation's resident KV cache");
  c_chat->add_option("-m,--model", chat.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_chat->add_option("--system", chat.system, "System message");
  c_chat->add_option("--chat-template", chat.chat_template,
                     "Template: chatml, llama3, llama2, or a Jinja file (default: the model's own)");
  c_chat->add_option("-n,--max-tokens", chat.max_tokens, "Most tokens per answer")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_chat->add_flag("-q,--quiet", chat.quiet, "No banner or per-turn statistics");
  add_engine_options(c_chat, chat.engine);
  add_sampling_options(c_chat, chat.sampling);

  ServeOptions serve;
  serve.sampling.temperature = 1.0f;  // OpenAI's default
  serve.sampling.top_p = 1.0f;
  serve.engine.max_running = 16;
  auto* c_serve = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server: chat and completions with streaming, multi-turn KV reuse, metrics");
  c_serve->add_option("-m,--model", serve.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_serve->add_option("--chat-template", serve.chat_template,
                      "Template: chatml, llama3, llama2, or a Jinja file (default: the model's own)");
  c_serve->add_option("--model-name", serve.model_name, "Model id in /v1/models (default: the file's name)");
  c_serve->add_option("--host", serve.host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  c_serve->add_option("--port", serve.port, "Port; 0 picks a free one (printed)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  c_serve->add_option("--api-key", serve.api_keys, "Require 'Authorization: Bearer KEY' (repeatable)");
  c_serve->add_option("--api-key-file", serve.api_key_file, "File of API keys, one per line")
      ->check(CLI::ExistingFile);
  c_serve->add_option("--max-queue", serve.max_queue, "Requests that may wait beyond the running ones; more get 429")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_serve->add_option("--http-threads", serve.http_threads,
                      "Connection workers (0: max running + max queue + 16); each open stream holds one")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_serve->add_option("--max-body", serve.max_body,
                      "Largest request body, counted after chunked and gzip/deflate decoding (413 beyond)")
      ->capture_default_str();
  c_serve->add_option("--max-headers", serve.max_headers, "Most header fields in a request (431 beyond)")
      ->capture_default_str()->check(CLI::Range(8, 10000));
  c_serve->add_option("--max-header-bytes", serve.max_header_bytes, "Largest header block of a request (431 beyond)")
      ->capture_default_str();
  c_serve->add_option("--read-timeout", serve.read_timeout_s,
                      "Seconds a whole request (headers and body) may take to arrive, from its first byte (408 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  c_serve->add_option("--write-timeout", serve.write_timeout_s, "Seconds a write to a client may stall")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  c_serve->add_option("--max-connections", serve.max_connections,
                      "Open connections at once (503 beyond; also kept below the file descriptor limit)")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  c_serve->add_option("--max-connections-per-ip", serve.max_connections_per_ip,
                      "Open connections at once from one client address (503 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  c_serve->add_option("--max-conversations", serve.max_conversations,
                      "Conversation records kept for reuse per API key (its least recently used dropped, with its KV)")->capture_default_str();
  c_serve->add_option("--log-level", serve.log_level, "debug, info, warn, error or off")->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));
  add_engine_options(c_serve, serve.engine);
  add_sampling_options(c_serve, serve.sampling);

  BenchRestoreOptions br;
  auto* c_br = app.add_subcommand(
      "bench-restore", "Time to restore an idle session from host memory and from disk vs re-prefilling it");
  c_br->add_option("-m,--model", br.model, "Benchmark this GGUF instead of the generated default")->check(CLI::ExistingFile);
  c_br->add_option("--preset", br.preset, "Attention shape of the generated model")->capture_default_str();
  c_br->add_option("--type", br.type, "Weight type of the generated model")->capture_default_str();
  c_br->add_option("--layers", br.layers, "Layers of the generated model")->capture_default_str();
  c_br->add_option("--cache-dir", br.cache_dir, "Where generated models are kept");
  c_br->add_option("--contexts", br.contexts, "Session lengths in tokens")->capture_default_str()->delimiter(',');
  c_br->add_option("--disk-dir", br.disk_dir, "Folder for the disk tier (default: a temporary one)");
  c_br->add_option("--json", br.json_out, "Write the figures as JSON");
  c_br->add_flag("--quick", br.quick, "Contexts 512 and 1024");
  c_br->add_option("--sessions", br.workload.sessions,
                   "Also run an oversubscribed multi-turn workload of this many conversations (e.g. 40) with "
                   "no tiers, the host tier and the disk tier")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_br->add_option("--oversubscription", br.workload.oversubscription,
                   "Conversations per conversation the KV pool holds resident")->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  c_br->add_option("--turns", br.workload.turns, "Turns per conversation")->capture_default_str()
      ->check(CLI::Range(2, 100));
  c_br->add_option("--first-tokens", br.workload.first_tokens, "First turn's prompt tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_br->add_option("--followup-tokens", br.workload.followup_tokens, "New tokens of each later turn")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c_br->add_option("--gen-tokens", br.workload.gen_tokens, "Tokens generated per turn")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_br->add_option("--concurrency", br.workload.concurrency, "Turns in flight at once")->capture_default_str()
      ->check(CLI::Range(1, 256));
  c_br->add_flag("--workload-only", br.workload_only, "Only the --sessions workload, not the per-context table");
  add_engine_options(c_br, br.engine);

  BenchBatchOptions bb;
  bb.engine.kv_memory = "auto";  // sized for every sequence of the largest concurrency
  auto* c_bb = app.add_subcommand(
      "bench-batch", "Decode tok/s against the number of concurrent sequences (continuous batching)");
  c_bb->add_option("-m,--model", bb.model, "Benchmark this GGUF instead of a generated model")
      ->check(CLI::ExistingFile);
  c_bb->add_option("--preset", bb.preset, "Shape of the generated model")->capture_default_str();
  c_bb->add_option("--type", bb.type, "Weight type of the generated model")->capture_default_str();
  c_bb->add_option("--concurrency", bb.concurrency, "Concurrent sequences to measure")
      ->capture_default_str()->delimiter(',');
  c_bb->add_option("--prompt-tokens", bb.prompt_tokens, "Prompt length of each sequence")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bb->add_option("--gen-tokens", bb.gen_tokens, "Tokens each sequence decodes")->capture_default_str()
      ->check(CLI::Range(2, 100000));
  c_bb->add_option("--cache-dir", bb.cache_dir, "Where generated models are kept (default ~/.cache/tangram/models)");
  c_bb->add_option("--json", bb.json_out, "Also write the figures as JSON to this file");
  c_bb->add_option("--svg", bb.svg_out, "Also plot tok/s against concurrency to this SVG file");
  c_bb->add_flag("--quick", bb.quick, "8 layers, fewer tokens: a run of well under a minute");
  add_engine_options(c_bb, bb.engine);

  BenchOptions bench;
  bench.engine.kv_memory = "auto";
  bench.engine.kv_chunk = 0;  // auto: a quarter of the first message
  auto* c_bench = app.add_subcommand(
      "bench", "Multi-turn serving benchmark: full, uniform, dynamic and tangram KV side by side (the main job)");
  c_bench->add_option("-m,--model", bench.model, "Benchmark this GGUF instead of the generated default")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--preset", bench.preset, "Attention shape of the generated model")->capture_default_str();
  c_bench->add_option("--type", bench.type, "Weight type of the generated model")->capture_default_str();
  c_bench->add_option("--layers", bench.layers, "Layers of the generated model (0: the preset's)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_bench->add_option("--cache-dir", bench.cache_dir, "Where generated models are kept");
  c_bench->add_option("--workload", bench.workload, "Preset: scbench (shared long context, follow-up questions), "
                      "locomo (long chat histories), sharegpt (short chat)")->capture_default_str()
      ->check(CLI::IsMember({"scbench", "locomo", "sharegpt"}));
  c_bench->add_option("--trace", bench.trace, "Replay a JSONL trace of conversations (see README)")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--sessions", bench.sessions, "Conversations (default: the preset's)")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--turns", bench.turns, "Turns per conversation")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--concurrency", bench.concurrency, "Conversations active at once (closed loop)")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--first-turn-tokens", bench.first_turn_tokens, "First message length")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--rate", bench.rate, "Open loop: new conversations per second (Poisson)")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--rates", bench.rates,
                      "Also run full and tangram open loop at each of these rates (new conversations per second): "
                      "TTFT vs request rate, ttft_vs_rate.svg")
      ->delimiter(',');
  c_bench->add_option("--seed", bench.seed, "Workload seed")->capture_default_str();
  c_bench->add_option("--policies", bench.policies, "Policies to run")->capture_default_str()->delimiter(',');
  c_bench->add_option("--ratios", bench.ratios, "Retention ratios")->capture_default_str()->delimiter(',');
  c_bench->add_option("--group-sizes", bench.group_sizes, "Head-group sizes for tangram")->capture_default_str()
      ->delimiter(',');
  c_bench->add_option("--scorer", bench.scorer, "Scorer of the compressing policies")->capture_default_str();
  c_bench->add_option("--profile", bench.profile, "Per-head profile for tangram (default: the real one of the preset's model)")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--profile-dir", bench.profile_dir, "Scorer folder of ../shared/profiles")->capture_default_str();
  c_bench->add_option("--profile-model", bench.profile_model, "Model folder of ../shared/profiles")->capture_default_str();
  c_bench->add_option("--memory-sessions", bench.memory_sessions,
                      "With --kv-memory auto: KV for this many conversations under full KV")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bench->add_flag("!--no-accuracy", bench.accuracy, "Skip the accuracy comparison against full KV");
  c_bench->add_option("--facts", bench.facts,
                      "Planted facts in a long chat, asked back later and scored by exact match, per policy "
                      "(needs a real chat model: default 4 with -m, else 0 = off)")->check(CLI::Range(-1, 144));
  c_bench->add_flag("--quick", bench.quick, "A small workload: the whole run in under 2 minutes");
  c_bench->add_option("-o,--out", bench.output.out_dir, "Folder for report.json, report.md and the plots")->capture_default_str();
  add_engine_options(c_bench, bench.engine);

  BenchServeOptions bs;
  bs.engine.max_running = 16;  // as `tangram serve`
  auto* c_bs = app.add_subcommand(
      "bench-serve", "HTTP serving benchmark: multi-turn clients at increasing request rates, session reuse on vs off");
  c_bs->add_option("--url", bs.url,
                   "Drive this running server (e.g. http://127.0.0.1:8080; start it with the same -m); "
                   "default: start one in process on a free port");
  c_bs->add_option("--api-key", bs.api_key, "Send 'Authorization: Bearer KEY'");
  c_bs->add_option("-m,--model", bs.model,
                   "GGUF model served in process (with --url: the server's model, for its tokenizer); "
                   "default: the generated model of --preset/--type/--layers")
      ->check(CLI::ExistingFile);
  c_bs->add_option("--preset", bs.preset, "Attention shape of the generated model")->capture_default_str();
  c_bs->add_option("--type", bs.type, "Weight type of the generated model")->capture_default_str();
  c_bs->add_option("--layers", bs.layers, "Layers of the generated model (0: the preset's)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--cache-dir", bs.cache_dir, "Where generated models are kept");
  c_bs->add_option("--workload", bs.workload,
                   "Preset: sharegpt (short chats), locomo (long histories), scbench (shared context); "
                   "a -quick suffix shrinks it")->capture_default_str();
  c_bs->add_option("--sessions", bs.sessions, "Conversations per run (default: the preset's)")
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--turns", bs.turns, "Turns per conversation (default: the preset's)")->check(CLI::NonNegativeNumber);
  c_bs->add_option("--seed", bs.seed, "Workload seed")->capture_default_str();
  c_bs->add_option("--rates", bs.rates,
                   "New conversations per second (open loop, Poisson), one run per rate and reuse mode "
                   "(default 0.5,1,2,4; with --quick 1,4)")
      ->delimiter(',')->check(CLI::PositiveNumber);
  c_bs->add_option("--max-retries", bs.max_retries, "Retries of a request answered 429 (after its Retry-After)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_bs->add_option("--timeout", bs.timeout_s, "Seconds a request may stall")->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  c_bs->add_option("--max-queue", bs.max_queue, "In-process server: requests that may wait; more get 429")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_bs->add_flag("--quick", bs.quick, "The -quick workload at 2 rates: well under a minute");
  c_bs->add_option("-o,--out", bs.out_dir, "Folder for report.json, report.md and the plots")->capture_default_str();
  c_bs->add_option("--soak", bs.soak,
                   "Soak mode: start `tangram serve` as a child process (-m, or the generated model; --kv-disk in a "
                   "temporary folder) and drive it this long (e.g. 90s, 10m) with a seeded mix of multi-turn chats "
                   "(streamed and not), mid-stream disconnects, session DELETEs (some mid-turn), requests that must "
                   "fail, and restarts (SIGTERM, some kill -9); samples RSS and /metrics; exits 1 unless the verdict "
                   "is PASS. --sessions = concurrent clients (default 6), --turns = turns per conversation (default 4); "
                   "--url, --rates, --workload, --quick and --max-retries do not apply");
  c_bs->add_option("--soak-restart-every", bs.soak_restart_every,
                   "With --soak: restart the server this often (every third restart a kill -9); 0 = never "
                   "(default: an eighth of --soak; none in its last fifth)");
  c_bs->add_option("--soak-sample", bs.soak_sample, "With --soak: sample the server's RSS and /metrics this often")
      ->capture_default_str();
  c_bs->add_option("--soak-rss-growth", bs.soak_rss_growth,
                   "With --soak: most RSS one server process may gain after its warm-up (the first quarter of its "
                   "life) before the verdict is FAIL")
      ->capture_default_str();
  const std::vector<CLI::Option*> bs_engine = add_engine_options(c_bs, bs.engine);

  BenchKvOptions bk;
  bk.engine.kv_memory = "4GiB";
  auto* c_bk = app.add_subcommand(
      "bench-kv", "KV policies side by side (full, uniform, dynamic, tangram) on one multi-turn workload");
  c_bk->add_option("-m,--model", bk.model, "Benchmark this GGUF instead of a generated model")->check(CLI::ExistingFile);
  c_bk->add_option("--preset", bk.preset, "Shape of the generated model")->capture_default_str();
  c_bk->add_option("--type", bk.type, "Weight type of the generated model")->capture_default_str();
  c_bk->add_option("--profile", bk.profile,
                   "Per-head profile for the tangram policy (default: the real Qwen3-4B profile of --scorer "
                   "in ../shared/profiles)")->check(CLI::ExistingFile);
  c_bk->add_option("--profile-scorer-dir", bk.scorer_profile_dir, "Folder of ../shared/profiles to take the profile from")
      ->capture_default_str();
  c_bk->add_option("--profile-model", bk.profile_model, "Model folder of ../shared/profiles")->capture_default_str();
  c_bk->add_option("--scorer", bk.scorer, "Scorer for the compressing policies")->capture_default_str();
  c_bk->add_option("--ratio", bk.ratio, "Retention ratio")->capture_default_str()->check(CLI::Range(0.01, 1.0));
  c_bk->add_option("--group-size", bk.group_size, "Heads per page for tangram")->capture_default_str()
      ->check(CLI::Range(1, 64));
  c_bk->add_option("--conversations", bk.conversations, "Conversations served together")->capture_default_str()
      ->check(CLI::Range(1, 256));
  c_bk->add_option("--turns", bk.turns, "Turns per conversation")->capture_default_str()->check(CLI::Range(1, 64));
  c_bk->add_option("--first-turn-tokens", bk.first_turn_tokens, "Tokens of the first message")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_bk->add_option("--turn-tokens", bk.turn_tokens, "Tokens of each later message")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_bk->add_option("--gen-tokens", bk.gen_tokens, "Tokens generated per turn")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  c_bk->add_option("--cache-dir", bk.cache_dir, "Where generated models are kept");
  c_bk->add_option("--json", bk.json_out, "Also write the figures as JSON");
  c_bk->add_flag("--quick", bk.quick, "8 layers, shorter turns: well under a minute");
  add_engine_options(c_bk, bk.engine);

  ProfileOptions prof;
  auto* c_prof = app.add_subcommand(
      "profile", "Measure per-head KV retention on pilot samples and write a profile (for --kv-policy tangram)");
  c_prof->add_option("-m,--model", prof.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_prof->add_option("--samples", prof.samples,
                     "Pilot text: a file of JSON lines {\"text\": ...} or plain text split at lines '---' "
                     "(long text is cut into --sample-tokens pieces); repeat for each kind of text. "
                     "Default: generated token sequences of two kinds")
      ->check(CLI::ExistingFile);
  c_prof->add_option("--scorer", prof.scorer, "Scorer: keydiff, kvzip, snapkv, tova, expected_attention, streamingllm")
      ->capture_default_str();
  c_prof->add_option("--ratio", prof.ratio, "Retention ratio profiled")->capture_default_str()->check(CLI::Range(0.01, 1.0));
  c_prof->add_option("--level", prof.level, "Budget spread: per-layer or cross-layer")->capture_default_str()
      ->check(CLI::IsMember({"per-layer", "cross-layer"}));
  c_prof->add_option("-n,--n-samples", prof.n_samples, "Most samples used")->capture_default_str()
      ->check(CLI::Range(2, 100000));
  c_prof->add_option("--sample-tokens", prof.sample_tokens, "Longest sample in tokens")->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  c_prof->add_option("--turns", prof.turns, "Turns per sample (growing prefixes), compressed every turn")
      ->capture_default_str()->check(CLI::Range(1, 16));
  c_prof->add_option("--sink", prof.sink, "First tokens always kept")->capture_default_str()->check(CLI::NonNegativeNumber);
  c_prof->add_option("--window", prof.window, "Recent tokens always kept")->capture_default_str()->check(CLI::NonNegativeNumber);
  c_prof->add_option("-t,--threads", prof.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_prof->add_option("-o,--out", prof.out, "Profile JSON to write")->capture_default_str();

  MkmodelOptions mk;
  auto* c_mk = app.add_subcommand("mkmodel", "Write a GGUF model with seeded random weights (for tests and benchmarks)");
  c_mk->add_option("--preset", mk.preset,
                   "tiny-llama, tiny-qwen2, tiny-qwen3, qwen3-4b-attn or llama3-8b-attn (default tiny-llama)");
  c_mk->add_option("--arch", mk.arch, "Override the architecture: llama, qwen2 or qwen3");
  c_mk->add_option("--layers", mk.n_layers, "Override the number of layers")->check(CLI::PositiveNumber);
  c_mk->add_option("--embd", mk.n_embd, "Override the embedding width")->check(CLI::PositiveNumber);
  c_mk->add_option("--ff", mk.n_ff, "Override the MLP width")->check(CLI::PositiveNumber);
  c_mk->add_option("--heads", mk.n_head, "Override the number of query heads")->check(CLI::PositiveNumber);
  c_mk->add_option("--kv-heads", mk.n_kv_head, "Override the number of KV heads")->check(CLI::PositiveNumber);
  c_mk->add_option("--head-dim", mk.head_dim, "Override the head size")->check(CLI::PositiveNumber);
  c_mk->add_option("--vocab", mk.vocab, "Override the vocabulary size")->check(CLI::PositiveNumber);
  c_mk->add_option("--ctx", mk.ctx, "Override the context length")->check(CLI::PositiveNumber);
  c_mk->add_option("--type", mk.type, "Weight type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m")->capture_default_str();
  c_mk->add_option("--seed", mk.seed, "Seed of the random weights")->capture_default_str();
  c_mk->add_flag("--tied", mk.tied, "Tie the output projection to the embedding");
  c_mk->add_flag("--llama3-rope", mk.llama3_rope, "Add Llama-3 RoPE scaling (a rope_freqs.weight tensor, as converted Llama 3.1 files have)");
  c_mk->add_option("--tokenizer", mk.tokenizer,
                   "Embed this vocabulary: a GGUF, a SentencePiece tokenizer.model or a tiktoken file")
      ->check(CLI::ExistingFile);
  c_mk->add_option("--flavor", mk.flavor, "For tiktoken files: llama3 or qwen2");
  c_mk->add_option("-o,--out", mk.out, "Output GGUF path")->required();
  c_mk->add_option("-t,--threads", mk.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);

  BenchModelOptions bm;
  auto* c_bm = app.add_subcommand("bench-model",
                                  "Prefill and decode tok/s of the forward pass against the memory-bandwidth limit");
  c_bm->add_option("-m,--model", bm.model, "Benchmark this GGUF instead of generated models")->check(CLI::ExistingFile);
  c_bm->add_option("--preset", bm.preset, "Shape of the generated models")->capture_default_str();
  c_bm->add_option("--types", bm.types, "Weight types of the generated models")->capture_default_str()->delimiter(',');
  c_bm->add_option("--prompt-tokens", bm.prompt_tokens, "Prompt length for prefill")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--gen-tokens", bm.gen_tokens, "Tokens to decode")->capture_default_str()->check(CLI::PositiveNumber);
  c_bm->add_option("-t,--threads", bm.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_bm->add_option("--reps", bm.reps, "Repetitions; the best is reported")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--cache-dir", bm.cache_dir, "Where generated models are kept (default ~/.cache/tangram/models)");
  c_bm->add_flag("!--no-llama-cpp", bm.llama_cpp, "Skip the llama.cpp comparison");
  c_bm->add_option("--concurrency", bm.concurrency,
                   "Also decode this many sequences at once through the engine, e.g. 1,2,4,8,16,32")
      ->delimiter(',');
  c_bm->add_option("-o,--out", bm.output.out_dir, "Folder for report.json, report.md and the plots");
  c_bm->add_flag("--json", bm.output.json_stdout, "Print report.json on stdout (the tables go to stderr)");
  c_bm->add_flag("--quick", bm.quick, "8 layers, short prompt: a run of well under a minute");

  ClusterOptions cl;
  auto* c_cl = app.add_subcommand(
      "cluster", "Group KV heads of similar retention (from a profile) into shared pages; print the waste");
  c_cl->add_option("--profile", cl.profile, "Retention profile JSON (tangram-profile-json/v1)")
      ->required()->check(CLI::ExistingFile);
  c_cl->add_option("--group-size", cl.group_size, "KV heads per group (G)")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_cl->add_option("--scope", cl.scope, "per-layer or global (default: global for a cross-layer profile)")
      ->check(CLI::IsMember({"per-layer", "global"}));
  c_cl->add_option("-o,--out", cl.out, "Write the chosen cluster map (JSON) here");

  PerplexityCmdOptions ppl;
  auto* c_ppl = app.add_subcommand(
      "perplexity",
      "Teacher-forced perplexity of a text under a KV policy, turn by turn as serving compresses it; "
      "with a compressing policy also the mean KL from full KV and the retention reached. Windows: "
      "consecutive -c tokens from an empty cache, BOS first, the remainder not evaluated (as "
      "llama-perplexity), but every position of a window is scored (not only its second half)");
  c_ppl->add_option("-m,--model", ppl.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_ppl->add_option("-f,--file", ppl.file, "Text file to evaluate")->required();
  c_ppl->add_option("--chunk", ppl.chunk, "Tokens appended per turn; the cache is compressed after each")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  c_ppl->add_flag("--json", ppl.json, "Print the result as JSON on stdout");
  add_engine_options(c_ppl, ppl.engine);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (*c_info) return cmd_info(info);
  if (*c_tok) return cmd_tokenize(tok);
  if (*c_run) return cmd_run(run);
  if (*c_chat) return cmd_chat(chat);
  if (*c_serve) return cmd_serve(serve);
  if (*c_br) return cmd_bench_restore(br);
  if (*c_bb) return cmd_bench_batch(bb);
  if (*c_prof) return cmd_profile(prof);
  if (*c_bk) return cmd_bench_kv(bk);
  if (*c_bench) return cmd_bench(bench);
  if (*c_bs) {
    for (const CLI::Option* o : c_bs->get_options())
      if (o->count() > 0 && !o->get_lnames().empty()) bs.given.push_back("--" + o->get_lnames().front());
    bs.engine_args = given_as_args(bs_engine);
    return cmd_bench_serve(bs);
  }
  if (*c_mk) return cmd_mkmodel(mk);
  if (*c_bm) return cmd_bench_model(bm);
  if (*c_cl) return cmd_cluster(cl);
  if (*c_ppl) {
    for (const CLI::Option* o : c_ppl->get_options())
      if (o->count() > 0 && !o->get_lnames().empty()) ppl.given.push_back("--" + o->get_lnames().front());
    return cmd_perplexity(ppl);
  }
  return 1;
}
