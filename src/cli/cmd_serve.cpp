// `tangram serve`: loads a model, starts the engine and the OpenAI-, Anthropic- and
// Ollama-compatible HTTP server, and serves until SIGINT or SIGTERM. Prints "listening on
// http://HOST:PORT" on stdout once it accepts connections (scripts wait for that line; with
// --port 0 it gives the port chosen).
#include <pthread.h>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/sampling_flags.h"
#include "common/units.h"
#include "engine/engine.h"
#include "launch/chat_prompt.h"
#include "launch/model_loading.h"
#include "launch/profile_settings.h"
#include "model/model.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

Result<std::vector<std::string>> read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read the API key file {}", path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    const auto b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.push_back(line.substr(b));
  }
  if (keys.empty()) return make_error("the API key file {} holds no key", path);
  return keys;
}

}  // namespace

int cmd_serve(const ServeOptions& opt) {
  server::ServerOptions so;
  so.host = opt.host;
  so.port = opt.port;
  so.api_keys = opt.api_keys;
  if (!opt.api_key_file.empty()) {
    auto keys = read_key_file(opt.api_key_file);
    if (!keys) return fail(keys.message());
    so.api_keys.insert(so.api_keys.end(), keys->begin(), keys->end());
  }
  so.allowed_hosts = opt.allowed_hosts;
  auto body = parse_bytes(opt.max_body);
  if (!body) return fail("--max-body: " + body.message());
  so.max_body_bytes = static_cast<size_t>(*body);
  if (!opt.max_body_in_flight.empty()) {
    auto in_flight = parse_bytes(opt.max_body_in_flight);
    if (!in_flight || *in_flight < *body)
      return fail("--max-body-in-flight: give at least --max-body");
    so.max_body_in_flight = static_cast<size_t>(*in_flight);
  }
  so.max_queue = opt.max_queue;
  so.http_threads = opt.http_threads;
  auto header_bytes = parse_bytes(opt.max_header_bytes);
  if (!header_bytes || *header_bytes < 1024) return fail("--max-header-bytes: give at least 1KiB");
  so.max_header_bytes = static_cast<size_t>(*header_bytes);
  so.max_headers = opt.max_headers;
  so.max_connections = opt.max_connections;
  so.max_connections_per_ip = opt.max_connections_per_ip;
  so.read_timeout_s = opt.read_timeout_s;
  so.write_timeout_s = opt.write_timeout_s;
  so.max_conversations = opt.max_conversations;
  so.context_overflow = opt.context_overflow == "refuse" ? server::ContextOverflow::Refuse
                        : opt.context_overflow == "drop-oldest"
                            ? server::ContextOverflow::DropOldest
                            : server::ContextOverflow::Shift;
  if (opt.pooling != "auto") so.pooling = parse_pooling(opt.pooling);
  auto level = server::parse_log_level(opt.log_level);
  if (!level) return fail(level.message());
  so.log_level = *level;
  so.defaults = opt.sampling;
  if (Status st = so.defaults.validate(); !st.ok()) return fail(st.message());
  so.model_name =
      opt.model_name.empty() ? std::filesystem::path(opt.model).stem().string() : opt.model_name;

  auto engine_opts = to_engine_options(opt.engine);
  if (!engine_opts) return fail(engine_opts.message());
  auto loaded = load_model_for_serving(opt.model, "", "", 0, "", opt.engine.threads,
                                       model_options_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  auto tmpl = pick_chat_template(opt.chat_template, tok);
  if (!tmpl) return fail(tmpl.message());
  auto profile = resolve_kv_profile(*engine_opts, opt.engine, model, tok, opt.model);
  if (!profile) return fail(profile.message());

  // Signals go to one thread that waits for them; every other thread (engine, HTTP workers)
  // inherits the blocked mask, so Ctrl-C never interrupts a step half-way.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-write is an error value, not a crash

  auto engine = Engine::create(model, tok, *engine_opts);
  if (!engine) return fail(engine.message());
  auto server = server::HttpServer::create(**engine, tok, std::move(*tmpl), so);
  if (!server) return fail(server.message());
  auto port = (*server)->bind();
  if (!port) return fail(port.message());

  const SchedulerOptions& sched = (*engine)->options();
  const SchedulerStats st = (*engine)->stats();
  fmt::print(stderr,
             "tangram serve: {} as '{}' | {} threads | context {} | KV memory {} ({} pages), "
             "policy {} | up to {} "
             "running + {} queued | {}\n",
             opt.model, so.model_name, (*engine)->threads(), (*engine)->context(),
             format_bytes(static_cast<double>(sched.kv_memory)), st.pool.total_pages,
             kv_policy_name(sched.compression.policy), sched.max_running, so.max_queue,
             so.api_keys.empty() ? "no API key (anyone who can connect may use it)"
                                 : fmt::format("{} API key(s)", so.api_keys.size()));
  fmt::print("listening on http://{}:{}\n", so.host, *port);
  std::fflush(stdout);

  server::HttpServer* raw = server->get();
  std::thread signal_waiter([raw, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    fmt::print(stderr, "tangram serve: {} received, stopping\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
    raw->stop();
  });
  Status served = (*server)->serve();
  // serve() returned: either stop() ran (the waiter is done) or listening failed; wake the waiter.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  server->reset();  // cancels and waits for this server's pending requests
  if (!served.ok()) return fail(served.message());
  return 0;
}

Command register_serve(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  ServeOptions& serve = *opt;
  serve.sampling.temperature = 1.0f;  // OpenAI's default
  serve.sampling.top_p = 1.0f;
  serve.engine.max_running = 16;
  auto* c_serve = app.add_subcommand("serve",
                                     "OpenAI-, Anthropic- and Ollama-compatible HTTP server: "
                                     "chat, completions, responses and messages with streaming, "
                                     "tools and logprobs; multi-turn KV reuse; metrics");
  c_serve->add_option("-m,--model", serve.model, "GGUF model")
      ->required()
      ->check(CLI::ExistingFile);
  c_serve->add_option(
      "--chat-template", serve.chat_template,
      "Template: chatml, llama3, llama2, or a Jinja file (default: the model's own)");
  c_serve->add_option("--model-name", serve.model_name,
                      "Model id in /v1/models (default: the file's name)");
  c_serve->add_option("--host", serve.host, "Address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  c_serve->add_option("--port", serve.port, "Port; 0 picks a free one (printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  c_serve->add_option("--api-key", serve.api_keys,
                      "Require 'Authorization: Bearer KEY' or 'x-api-key: KEY' (repeatable)");
  c_serve->add_option("--api-key-file", serve.api_key_file, "File of API keys, one per line")
      ->check(CLI::ExistingFile);
  c_serve->add_option(
      "--allowed-host", serve.allowed_hosts,
      "A host name clients may reach the server by (repeatable; '*' allows any). IP addresses, "
      "localhost and --host are always allowed; a request naming another Host gets 403, which "
      "keeps "
      "web pages from driving the server through DNS rebinding");
  c_serve
      ->add_option("--max-queue", serve.max_queue,
                   "Requests that may wait beyond the running ones; more get 429")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_serve
      ->add_option(
          "--http-threads", serve.http_threads,
          "Connection workers (0: max running + max queue + 16); each open stream holds one")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_serve
      ->add_option(
          "--max-body", serve.max_body,
          "Largest request body, counted after chunked and gzip/deflate decoding (413 beyond)")
      ->capture_default_str();
  c_serve->add_option(
      "--max-body-in-flight", serve.max_body_in_flight,
      "Request bodies held at once over all connections, while read and handled; a request past "
      "it gets 503 with Retry-After (default: 32 x --max-body)");
  c_serve
      ->add_option("--max-headers", serve.max_headers,
                   "Most header fields in a request (431 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(8, 10000));
  c_serve
      ->add_option("--max-header-bytes", serve.max_header_bytes,
                   "Largest header block of a request (431 beyond)")
      ->capture_default_str();
  c_serve
      ->add_option("--read-timeout", serve.read_timeout_s,
                   "Seconds a whole request (headers and body) may take to arrive, from its first "
                   "byte (408 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  c_serve
      ->add_option("--write-timeout", serve.write_timeout_s,
                   "Seconds a write to a client may stall")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  c_serve
      ->add_option(
          "--max-connections", serve.max_connections,
          "Open connections at once (503 beyond; also kept below the file descriptor limit)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  c_serve
      ->add_option("--max-connections-per-ip", serve.max_connections_per_ip,
                   "Open connections at once from one client address (503 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  c_serve
      ->add_option("--max-conversations", serve.max_conversations,
                   "Conversation records kept for reuse per API key (its least recently used "
                   "dropped, with its KV)")
      ->capture_default_str();
  c_serve
      ->add_option("--context-overflow", serve.context_overflow,
                   "A chat longer than the context: shift (leave out its oldest turns, the system "
                   "prompt and last message kept, and move the kept turns' KV to their new "
                   "positions), drop-oldest (the same, the kept turns recomputed) or refuse "
                   "(context_length_exceeded)")
      ->capture_default_str()
      ->check(CLI::IsMember({"shift", "drop-oldest", "refuse"}));
  c_serve
      ->add_option("--pooling", serve.pooling,
                   "How /v1/embeddings and /api/embed pool the hidden states: auto (as the GGUF "
                   "says, else the last token's), mean, cls (first token) or last")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "mean", "cls", "last"}));
  c_serve->add_option("--log-level", serve.log_level, "debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));
  add_engine_options(c_serve, serve.engine);
  add_sampling_options(c_serve, serve.sampling);
  return {c_serve, [opt] { return cmd_serve(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
