// `tangram bench-serve`: the HTTP serving benchmark. Multi-turn clients (evaluation/http_load.h)
// drive `tangram serve` (in process on a free port, or a running server with --url) at each
// request rate, once with session reuse off (a fresh X-Session-Id every turn, so every turn
// prefills its whole history) and once on (one id per conversation, so later turns reuse the
// resident KV), on the same seeded workload. Reported per run: completed requests/s, output
// tokens/s, TTFT p50/p99, TPOT p50, end-to-end p50, the share of prompt tokens served from cache
// and the 429s; per rate, the on/off ratios. The server's conversations are deleted between runs,
// so every run starts from the same empty state. Outputs: a table on stdout, report.json (every
// raw figure, every request), report.md and SVG plots in --out.
#include "benchmark/serve_bench.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "benchmark/report.h"
#include "benchmark/soak.h"
#include "common/progress.h"
#include "common/svg_plot.h"
#include "common/units.h"
#include "engine/engine.h"
#include "evaluation/http_load.h"
#include "evaluation/metrics.h"
#include "evaluation/workload.h"
#include "gguf/gguf_file.h"
#include "launch/model_loading.h"
#include "launch/profile_settings.h"
#include "server/http_server.h"

namespace tangram::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One run: a rate and a reuse mode.
struct ServeRun {
  double rate = 0;
  SessionReuse reuse = SessionReuse::On;
  HttpLoadRun load;
  RunMetrics metrics;
  json engine;  // scheduler counters over the run (in-process server only)
};

// The server this benchmark drives when no --url is given: an Engine and an HttpServer on
// 127.0.0.1 and a free port, serving on a background thread until destroyed.
class InProcessServer {
 public:
  static Result<std::unique_ptr<InProcessServer>> start(Model& model, const Tokenizer& tok,
                                                        const EngineOptions& eo,
                                                        const BenchServeOptions& opt) {
    auto s = std::unique_ptr<InProcessServer>(new InProcessServer());
    TG_ASSIGN(s->engine_, Engine::create(model, tok, eo));
    // Completions only: the template is never rendered, but the server wants one.
    auto tmpl = tok.chat_template().empty() ? ChatTemplate::builtin("chatml")
                                            : ChatTemplate::parse(tok.chat_template());
    if (!tmpl) tmpl = ChatTemplate::builtin("chatml");
    if (!tmpl) return tmpl.error();
    server::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.max_queue = opt.max_queue;
    so.log_level = server::LogLevel::Warn;  // the access log would drown the progress bar
    if (!opt.api_key.empty()) so.api_keys = {opt.api_key};
    TG_ASSIGN(s->server_, server::HttpServer::create(*s->engine_, tok, std::move(*tmpl), so));
    TG_ASSIGN(s->port_, s->server_->bind());
    server::HttpServer* raw = s->server_.get();
    s->thread_ = std::thread([raw] { (void)raw->serve(); });
    return s;
  }
  ~InProcessServer() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();  // before the engine it submits to
    engine_.reset();
  }
  int port() const { return port_; }
  Engine& engine() { return *engine_; }

 private:
  InProcessServer() = default;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

std::string fmt_ratio(double r) { return std::isfinite(r) ? fmt::format("{:.2f}", r) : "-"; }

double ratio(double a, double b) {
  return std::isfinite(a) && std::isfinite(b) && b > 0 ? a / b : std::nan("");
}

json null_if_nan(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Prompt and cached tokens of the completed requests, per turn index.
json by_turn(const HttpLoadRun& run) {
  std::vector<int64_t> n, prompt, cached;
  for (const auto& r : run.requests) {
    if (r.record.error || r.record.turn < 0) continue;
    const auto t = static_cast<size_t>(r.record.turn);
    if (n.size() <= t) {
      n.resize(t + 1);
      prompt.resize(t + 1);
      cached.resize(t + 1);
    }
    ++n[t];
    prompt[t] += r.record.prompt_tokens;
    cached[t] += r.record.cached_tokens;
  }
  json out = json::array();
  for (size_t t = 0; t < n.size(); ++t)
    out.push_back({{"turn", t},
                   {"requests", n[t]},
                   {"prompt_tokens", prompt[t]},
                   {"cached_tokens", cached[t]}});
  return out;
}

json request_json(const HttpRequestRecord& r) {
  const RequestRecord& q = r.record;
  json j = {{"conversation", q.session},        {"turn", q.turn},
            {"session_id", r.session_id},       {"status", r.http_status},
            {"rejections_429", r.rejections},   {"submit_s", q.submit_s},
            {"first_token_s", q.first_token_s}, {"finish_s", q.finish_s},
            {"retry_wait_s", q.queue_s},        {"prompt_tokens", q.prompt_tokens},
            {"cached_tokens", q.cached_tokens}, {"completion_tokens", q.output_tokens},
            {"finish_reason", r.finish_reason}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

json engine_delta(const SchedulerStats& a, const SchedulerStats& b) {
  return {{"prefill_tokens", b.prefill_tokens - a.prefill_tokens},
          {"decode_tokens", b.decode_tokens - a.decode_tokens},
          {"preemptions", b.preemptions - a.preemptions},
          {"session_evictions", b.session_evictions - a.session_evictions},
          {"steps", b.steps - a.steps}};
}

}  // namespace

namespace {

// What every run shares: the workload, the rates, the server and the client's options.
// Declared so that the in-process server (which serves `loaded`) goes before the model.
struct ServeSetup {
  WorkloadSpec spec;
  std::vector<double> rates;
  LoadedModel loaded;
  std::unique_ptr<GgufFile> vocab_file;  // --url: the model file its tokenizer reads
  std::unique_ptr<Tokenizer> url_tokenizer;
  const Tokenizer* tok = nullptr;
  std::unique_ptr<InProcessServer> local;  // no --url
  int64_t context = 0;                     // the server's context per conversation, when known
  HttpEndpoint endpoint;
  std::string target;
  HttpLoadOptions load;
  std::vector<Conversation> first;  // the conversations at the first rate
  int64_t planned = 0;              // requests per run
};

Status resolve_workload(const BenchServeOptions& opt, ServeSetup& s) {
  TG_ASSIGN(s.spec, workload_preset(opt.workload));
  if (opt.quick && s.spec.preset.find("-quick") == std::string::npos)
    s.spec = scale_for_quick(s.spec);
  if (opt.conversations > 0) s.spec.sessions = opt.conversations;
  if (opt.turns > 0) s.spec.turns = opt.turns;
  s.spec.seed = opt.seed;
  s.spec.arrival = WorkloadSpec::Arrival::OpenLoop;
  s.rates = opt.rates;
  if (s.rates.empty())
    s.rates = opt.quick ? std::vector<double>{1.0, 4.0} : std::vector<double>{0.5, 1.0, 2.0, 4.0};
  for (double r : s.rates)
    if (!(std::isfinite(r) && r > 0))
      return make_error("--rates: every rate must be > 0, got {}", r);
  std::sort(s.rates.begin(), s.rates.end());
  s.rates.erase(std::unique(s.rates.begin(), s.rates.end()), s.rates.end());
  return Status::Ok();
}

Status start_local_server(const BenchServeOptions& opt, ServeSetup& s) {
  TG_ASSIGN(EngineOptions eo, to_engine_options(opt.engine));
  TG_ASSIGN(s.loaded, load_model_for_serving(opt.model, opt.preset, opt.type,
                                             opt.model.empty() ? opt.layers : 0, opt.cache_dir,
                                             opt.engine.threads, model_options_for(opt.engine)));
  s.tok = s.loaded.tokenizer.get();
  TG_ASSIGN(ResolvedProfile profile,
            resolve_kv_profile(eo, opt.engine, *s.loaded.model, *s.tok, s.loaded.path));
  TG_ASSIGN(s.local, InProcessServer::start(*s.loaded.model, *s.tok, eo, opt));
  s.context = s.local->engine().context();
  s.target = fmt::format("http://127.0.0.1:{}", s.local->port());
  TG_ASSIGN(s.endpoint, parse_base_url(s.target));
  return Status::Ok();
}

// --url: only the tokenizer of the server's model is needed here.
Status open_url_tokenizer(const BenchServeOptions& opt, ServeSetup& s) {
  std::string path = opt.model;
  if (path.empty()) {
    TG_ASSIGN(path, cached_synth_model(opt.preset, opt.type, opt.layers, opt.cache_dir,
                                       opt.engine.threads));
  }
  TG_ASSIGN(s.vocab_file, GgufFile::open(path));
  TG_ASSIGN(s.url_tokenizer, Tokenizer::from_gguf(*s.vocab_file));
  s.tok = s.url_tokenizer.get();
  s.loaded.path = path;
  return Status::Ok();
}

// The server (started here, or --url), reachable and with nothing of an earlier run lingering.
Status connect(const BenchServeOptions& opt, ServeSetup& s) {
  if (opt.url.empty()) {
    TG_TRY(start_local_server(opt, s));
  } else {
    s.target = opt.url;
    auto ep = parse_base_url(s.target);
    if (!ep) return make_error("--url: {}", ep.message());
    s.endpoint = *ep;
  }
  if (auto d = delete_all_sessions(s.endpoint, opt.api_key); !d)
    return make_error("cannot use the server at {}: {}", s.target, d.message());
  if (!s.local) TG_TRY(open_url_tokenizer(opt, s));
  s.load.endpoint = s.endpoint;
  s.load.api_key = opt.api_key;
  s.load.max_429_retries = opt.max_retries;
  s.load.timeout_s = opt.timeout_s;
  const Tokenizer* tok = s.tok;
  s.load.encode_reply = [tok](const std::string& text) { return encode_continuation(*tok, text); };
  return Status::Ok();
}

// The conversations of the first rate decide the sizes (the others differ only in arrivals).
Status plan_conversations(ServeSetup& s) {
  s.spec.vocab = std::max<int32_t>(4, s.tok->n_vocab());
  if (s.loaded.model)
    s.spec.vocab =
        static_cast<int32_t>(std::min<int64_t>(s.loaded.model->config().vocab, s.spec.vocab));
  s.spec.request_rate = s.rates.front();
  TG_ASSIGN(s.first, generate_workload(s.spec));
  int64_t longest = 0;
  for (const auto& c : s.first) {
    s.planned += static_cast<int64_t>(c.turns.size());
    int64_t n = 0;
    for (const auto& t : c.turns) n += static_cast<int64_t>(t.user_tokens.size()) + t.output_tokens;
    longest = std::max(longest, n);
  }
  if (s.context > 0 && longest + 8 > s.context)
    return make_error(
        "a conversation reaches {} tokens, past the server's context of {}: shorten the "
        "workload (--turns, --workload ...-quick)",
        longest, s.context);
  return Status::Ok();
}

// Pages in the weights and starts the HTTP workers: one short request, then forgets it.
Status warm_up(const BenchServeOptions& opt, const ServeSetup& s) {
  HttpLoadOptions w = s.load;
  w.run_tag = fmt::format("bs{}-warmup", getpid());
  Conversation c;
  c.id = "warmup";
  c.turns.push_back(s.first.front().turns.front());
  c.turns.back().output_tokens = std::min<int64_t>(4, c.turns.back().output_tokens);
  TG_ASSIGN(HttpLoadRun r, run_http_load(w, {c}));
  if (r.requests.empty() || !r.requests.front().error.empty())
    return make_error("the warm-up request to {} failed: {}", s.target,
                      r.requests.empty() ? "not sent" : r.requests.front().error);
  if (auto d = delete_all_sessions(s.endpoint, opt.api_key); !d) return d.error();
  return Status::Ok();
}

// One run at `rate` with `reuse`, measured; the server's conversations are deleted after it.
Result<ServeRun> run_once(const BenchServeOptions& opt, ServeSetup& s,
                          const std::vector<Conversation>& conversations, size_t rate_index,
                          SessionReuse reuse, const std::function<void(int64_t)>& progress) {
  HttpLoadOptions o = s.load;
  o.reuse = reuse;
  o.run_tag = fmt::format("bs{}-r{}-{}", getpid(), rate_index, session_reuse_name(reuse));
  SchedulerStats before;
  if (s.local) {
    s.local->engine().wait_idle();
    before = s.local->engine().stats();
  }
  TG_ASSIGN(HttpLoadRun load,
            run_http_load(o, conversations, [&](int64_t d, int64_t) { progress(d); }));
  ServeRun run;
  run.rate = s.rates[rate_index];
  run.reuse = reuse;
  auto m = compute_run_metrics(request_records(load), load.wall_s);
  if (!m)
    return make_error("rate {}, reuse {}: {}", run.rate, session_reuse_name(reuse), m.message());
  run.metrics = *m;
  if (s.local) {
    s.local->engine().wait_idle();
    run.engine = engine_delta(before, s.local->engine().stats());
  }
  run.load = std::move(load);
  if (auto d = delete_all_sessions(s.endpoint, opt.api_key); !d) return d.error();
  return run;
}

// Every rate, reuse off then on, on the same seeded conversations.
Result<std::vector<ServeRun>> run_rates(const BenchServeOptions& opt, ServeSetup& s) {
  std::vector<ServeRun> runs;
  ProgressBar bar("bench-serve", s.planned * static_cast<int64_t>(s.rates.size()) * 2);
  int64_t done_before = 0;
  for (size_t ri = 0; ri < s.rates.size(); ++ri) {
    s.spec.request_rate = s.rates[ri];
    TG_ASSIGN(std::vector<Conversation> conversations, generate_workload(s.spec));
    for (SessionReuse reuse : {SessionReuse::Off, SessionReuse::On}) {
      TG_ASSIGN(ServeRun run, run_once(opt, s, conversations, ri, reuse,
                                       [&](int64_t d) { bar.update(done_before + d); }));
      done_before += s.planned;
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

// The gain from reuse at one rate: on over off.
struct ReuseGain {
  double rate, ttft_p50, ttft_p99, tokens_per_s, requests_per_s;
};

std::vector<ReuseGain> reuse_gains(const std::vector<double>& rates,
                                   const std::vector<ServeRun>& runs) {
  std::vector<ReuseGain> gains;
  for (double rate : rates) {
    const ServeRun* on = nullptr;
    const ServeRun* off = nullptr;
    for (const auto& r : runs)
      if (r.rate == rate) (r.reuse == SessionReuse::On ? on : off) = &r;
    if (!on || !off) continue;
    gains.push_back({rate, ratio(on->metrics.ttft_s.p50, off->metrics.ttft_s.p50),
                     ratio(on->metrics.ttft_s.p99, off->metrics.ttft_s.p99),
                     ratio(on->metrics.output_tokens_per_s, off->metrics.output_tokens_per_s),
                     ratio(on->metrics.requests_per_s, off->metrics.requests_per_s)});
  }
  return gains;
}

json run_json(const ServeRun& r) {
  const RunMetrics& m = r.metrics;
  json row = {{"rate", r.rate},
              {"reuse", session_reuse_name(r.reuse)},
              {"planned", r.load.planned},
              {"sent", r.load.requests.size()},
              {"completed", m.completed},
              {"errors", m.errors},
              {"skipped", r.load.skipped},
              {"rejected_429", r.load.rejected_429},
              {"gave_up_429", r.load.gave_up_429},
              {"metrics", m},
              {"by_turn", by_turn(r.load)}};
  if (!r.engine.is_null()) row["engine"] = r.engine;
  json reqs = json::array();
  for (const auto& q : r.load.requests) reqs.push_back(request_json(q));
  row["requests"] = std::move(reqs);
  return row;
}

json report_json(const BenchServeOptions& opt, const ServeSetup& s,
                 const std::vector<ServeRun>& runs, const std::vector<ReuseGain>& gains) {
  const WorkloadSpec& spec = s.spec;
  json j;
  j["tool"] = "tangram bench-serve";
  j["target"] = opt.url.empty() ? "in-process" : opt.url;
  j["model"] = s.loaded.path;
  j["workload"] = {{"preset", spec.preset},
                   {"sessions", spec.sessions},
                   {"turns", spec.turns},
                   {"first_turn_tokens", spec.first_turn_tokens},
                   {"followup_tokens", spec.followup_tokens},
                   {"output_tokens", spec.output_tokens},
                   {"length_jitter", spec.length_jitter},
                   {"seed", spec.seed},
                   {"vocab", spec.vocab},
                   {"planned_requests_per_run", s.planned}};
  j["rates"] = s.rates;
  if (s.local) {
    const SchedulerOptions& so = s.local->engine().options();
    j["server"] = {{"threads", s.local->engine().threads()},
                   {"context", s.local->engine().context()},
                   {"kv_memory_bytes", so.kv_memory},
                   {"max_running", so.max_running},
                   {"max_queue", opt.max_queue},
                   {"kv_policy", std::string(kv_policy_name(so.compression.policy))}};
  }
  for (const ServeRun& r : runs) j["runs"].push_back(run_json(r));
  for (const ReuseGain& x : gains)
    j["ratios_on_over_off"].push_back({{"rate", x.rate},
                                       {"ttft_p50", null_if_nan(x.ttft_p50)},
                                       {"ttft_p99", null_if_nan(x.ttft_p99)},
                                       {"output_tokens_per_s", null_if_nan(x.tokens_per_s)},
                                       {"requests_per_s", null_if_nan(x.requests_per_s)}});
  return j;
}

// One row of the runs table, as `pattern` lays it out (console or Markdown).
std::string run_row(std::string_view pattern, const ServeRun& r) {
  const RunMetrics& m = r.metrics;
  return fmt::format(
      fmt::runtime(pattern), r.rate, session_reuse_name(r.reuse), m.requests_per_s,
      m.output_tokens_per_s, fmt_s(m.ttft_s.p50), fmt_s(m.ttft_s.p99), fmt_s(m.tpot_s.p50),
      fmt_s(m.e2e_s.p50), std::isfinite(m.cached_fraction) ? 100.0 * m.cached_fraction : 0.0,
      static_cast<int64_t>(r.load.rejected_429), m.errors + static_cast<size_t>(r.load.skipped));
}

void print_tables(std::FILE* out, const std::vector<ServeRun>& runs,
                  const std::vector<ReuseGain>& gains) {
  fmt::print(out, "\n{:>6} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>5} {:>6}\n", "rate",
             "reuse", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "e2e p50", "cached",
             "429s", "errors");
  for (const ServeRun& r : runs)
    fmt::print(
        out, "{}",
        run_row("{:>6g} {:>5} {:>8.3f} {:>9.2f} {:>9} {:>9} {:>9} {:>9} {:>6.1f}% {:>5} {:>6}\n",
                r));
  fmt::print(out,
             "\nGain from session reuse (reuse on / reuse off; TTFT below 1 and throughput above 1 "
             "favour reuse):\n");
  fmt::print(out, "{:>6} {:>13} {:>13} {:>15} {:>13}\n", "rate", "TTFT p50", "TTFT p99",
             "out tok/s", "req/s");
  for (const ReuseGain& x : gains)
    fmt::print(out, "{:>6g} {:>13} {:>13} {:>15} {:>13}\n", x.rate, fmt_ratio(x.ttft_p50),
               fmt_ratio(x.ttft_p99), fmt_ratio(x.tokens_per_s), fmt_ratio(x.requests_per_s));
}

std::string report_markdown(const ServeSetup& s, const std::vector<ServeRun>& runs,
                            const std::vector<ReuseGain>& gains) {
  const WorkloadSpec& spec = s.spec;
  std::string md = "# tangram bench-serve report\n\n";
  md += fmt::format(
      "Server `{}`, model `{}`. Workload `{}`: {} conversations x {} turns per run (first turn {} "
      "tokens, follow-ups {}, answers up to {}), open-loop Poisson arrivals; each run once with "
      "session "
      "reuse off (a fresh X-Session-Id every turn) and once on (one per conversation). Temperature "
      "0. "
      "Measured by the client: TTFT = request sent to the first streamed text, TPOT = the rest of "
      "the stream per further token, throughput = completed output tokens / run time; cached = "
      "prompt tokens the server reports as served from the conversation's resident KV.\n\n",
      s.target, s.loaded.path, spec.preset, spec.sessions, spec.turns, spec.first_turn_tokens,
      spec.followup_tokens, spec.output_tokens);
  md +=
      "| rate (conv/s) | reuse | req/s | out tok/s | TTFT p50 | TTFT p99 | TPOT p50 | e2e p50 | "
      "cached | 429s | errors |\n"
      "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ServeRun& r : runs)
    md += run_row("| {:g} | {} | {:.3f} | {:.2f} | {} | {} | {} | {} | {:.1f}% | {} | {} |\n", r);
  md +=
      "\nReuse on / reuse off:\n\n| rate | TTFT p50 | TTFT p99 | out tok/s | req/s |\n| ---: | "
      "---: | ---: | ---: | ---: |\n";
  for (const ReuseGain& x : gains)
    md +=
        fmt::format("| {:g} | {} | {} | {} | {} |\n", x.rate, fmt_ratio(x.ttft_p50),
                    fmt_ratio(x.ttft_p99), fmt_ratio(x.tokens_per_s), fmt_ratio(x.requests_per_s));
  md +=
      "\nPlots: `ttft_vs_rate.svg`, `throughput_vs_rate.svg`. Every request's figures: "
      "`report.json`.\n";
  return md;
}

LinePlot rate_plot(std::string title, std::string y_label) {
  LinePlot p;
  p.title = std::move(title);
  p.x_label = "new conversations per second";
  p.y_label = std::move(y_label);
  p.log2_x = true;
  return p;
}

LinePlot ttft_plot(const std::vector<ServeRun>& runs) {
  LinePlot p = rate_plot("TTFT vs request rate, session reuse on and off", "TTFT (s)");
  for (SessionReuse reuse : {SessionReuse::On, SessionReuse::Off})
    for (int pct : {50, 99}) {
      PlotSeries s{fmt::format("reuse {} p{}", session_reuse_name(reuse), pct), {}, {}};
      for (const auto& r : runs) {
        const double v = pct == 50 ? r.metrics.ttft_s.p50 : r.metrics.ttft_s.p99;
        if (r.reuse != reuse || !std::isfinite(v)) continue;
        s.x.push_back(r.rate);
        s.y.push_back(v);
      }
      p.series.push_back(std::move(s));
    }
  return p;
}

LinePlot throughput_plot(const std::vector<ServeRun>& runs) {
  LinePlot p =
      rate_plot("Output throughput vs request rate, session reuse on and off", "output tokens/s");
  for (SessionReuse reuse : {SessionReuse::On, SessionReuse::Off}) {
    PlotSeries s{fmt::format("reuse {}", session_reuse_name(reuse)), {}, {}};
    for (const auto& r : runs)
      if (r.reuse == reuse) {
        s.x.push_back(r.rate);
        s.y.push_back(r.metrics.output_tokens_per_s);
      }
    p.series.push_back(std::move(s));
  }
  return p;
}

// Set up (workload, server, conversations, warm-up), run every rate and reuse mode, report.
Status serve_rates(const BenchServeOptions& opt) {
  ServeSetup s;
  TG_TRY(resolve_workload(opt, s));
  TG_TRY(prepare_report_dir(opt.output));
  TG_TRY(connect(opt, s));
  TG_TRY(plan_conversations(s));
  TG_TRY(warm_up(opt, s));
  std::FILE* console = opt.output.console();
  fmt::print(
      console,
      "tangram bench-serve: {} ({}), workload {} ({} sessions x {} turns, first turn {} tokens, "
      "follow-ups {}, answers {}), rates {} sessions/s, reuse off and on\n",
      s.target, s.loaded.path, s.spec.preset, s.spec.sessions, s.spec.turns,
      s.spec.first_turn_tokens, s.spec.followup_tokens, s.spec.output_tokens,
      fmt::join(s.rates, ", "));
  TG_ASSIGN(std::vector<ServeRun> runs, run_rates(opt, s));

  const std::vector<ReuseGain> gains = reuse_gains(s.rates, runs);
  print_tables(console, runs, gains);
  BenchReport report{
      report_json(opt, s, runs, gains),
      report_markdown(s, runs, gains),
      {{"ttft_vs_rate.svg", ttft_plot(runs)}, {"throughput_vs_rate.svg", throughput_plot(runs)}}};
  TG_TRY(write_report(report, opt.output));
  int64_t failed = 0;
  for (const ServeRun& r : runs) failed += static_cast<int64_t>(r.metrics.errors) + r.load.skipped;
  if (failed > 0)
    return make_error("{} requests failed or were skipped (see the errors in report.json)", failed);
  return Status::Ok();
}

}  // namespace

Status check_bench_serve_flags(const BenchServeOptions& opt) {
  TG_TRY(check_soak_flags(opt));
  if (opt.url.empty()) return Status::Ok();
  // With --url the server is someone else's: the flags that configure the in-process one would
  // be accepted and ignored. --threads stays: it builds the generated model whose tokenizer is
  // read.
  if (std::find(opt.given.begin(), opt.given.end(), "--max-queue") != opt.given.end())
    return make_error(
        "--max-queue sets the in-process server's queue: with --url, start the server with it");
  for (const std::string& word : opt.engine_args)
    if (word.rfind("--", 0) == 0 && word != "--threads")
      return make_error("{} configures the in-process server: with --url, start the server with it",
                        word);
  return Status::Ok();
}

Status run_serve_bench(const BenchServeOptions& opt) {
  TG_TRY(check_bench_serve_flags(opt));
  std::signal(SIGPIPE, SIG_IGN);  // a connection the server drops is an error value, not a crash
  return serve_rates(opt);
}

}  // namespace tangram::bench
