// The soak benchmark's driver: plan (flags, model, server arguments), run (clients, samples,
// restarts), settle (delete everything, wait for the server to drain), judge and report.
#include "benchmark/soak.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "benchmark/server_process.h"
#include "common/svg_plot.h"
#include "common/units.h"
#include "evaluation/http_load.h"
#include "evaluation/soak_load.h"
#include "launch/model_loading.h"

namespace tangram::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kStartupS = 300;  // a generated model may be written and loaded first
constexpr double kStopS = 60;      // a SIGTERM'd server that takes longer is hung (then killed)
constexpr double kSettleS = 30;    // the most the end waits for pages and in-flight to drain
constexpr int kMaxTokens = 24;    // per answer: many short turns exercise more than a few long ones
constexpr size_t kExamples = 20;  // failed requests kept verbatim in the report

struct SoakPlan {
  double duration_s = 0, restart_every_s = 0, sample_every_s = 0;
  int64_t rss_growth_bytes = 0;
  int clients = 6, turns = 4;
  std::string model;
  std::vector<std::string> server_args;
  fs::path work_dir;  // the server's log and (unless --kv-disk was given) its disk tier
};

Result<double> duration_flag(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) return make_error("{}: {}", flag, d.message());
  return *d;
}

}  // namespace

Status check_soak_flags(const BenchServeOptions& opt) {
  auto given = [&](std::string_view f) {
    return std::find(opt.given.begin(), opt.given.end(), f) != opt.given.end();
  };
  if (opt.soak.empty()) {
    for (const char* f : {"--soak-restart-every", "--soak-sample", "--soak-rss-growth"})
      if (given(f)) return make_error("{} needs --soak", f);
    return Status::Ok();
  }
  for (const char* f : {"--url", "--rates", "--workload", "--quick", "--max-retries"})
    if (given(f))
      return make_error(
          "{} does not apply to --soak (it starts, restarts and drives its own server; a 429 is "
          "counted as an outcome, not retried)",
          f);
  return Status::Ok();
}

namespace {

Result<SoakPlan> plan_soak(const BenchServeOptions& opt) {
  SoakPlan p;
  TG_ASSIGN(p.duration_s, duration_flag("--soak", opt.soak));
  if (p.duration_s < 5) return make_error("--soak: at least 5s, got {}", opt.soak);
  p.restart_every_s = std::max(5.0, p.duration_s / 8);
  if (!opt.soak_restart_every.empty()) {
    TG_ASSIGN(p.restart_every_s, duration_flag("--soak-restart-every", opt.soak_restart_every));
  }
  TG_ASSIGN(p.sample_every_s, duration_flag("--soak-sample", opt.soak_sample));
  if (p.sample_every_s < 0.1)
    return make_error("--soak-sample: at least 100ms, got {}", opt.soak_sample);
  auto growth = parse_bytes(opt.soak_rss_growth);
  if (!growth) return make_error("--soak-rss-growth: {}", growth.message());
  p.rss_growth_bytes = static_cast<int64_t>(*growth);
  if (opt.conversations > 0) p.clients = opt.conversations;
  if (opt.turns > 0) p.turns = opt.turns;
  p.model = opt.model;
  if (p.model.empty()) {
    TG_ASSIGN(p.model, cached_synth_model(opt.preset, opt.type, opt.layers, opt.cache_dir,
                                          opt.engine.threads));
  }
  p.work_dir = fs::temp_directory_path() / fmt::format("tangram-soak-{}", getpid());
  std::error_code ec;
  fs::remove_all(p.work_dir, ec);
  fs::create_directories(p.work_dir / "kv", ec);
  if (ec) return make_error("cannot create {}: {}", p.work_dir.string(), ec.message());
  p.server_args = {"-m",   p.model,       "--log-level",
                   "warn", "--max-queue", std::to_string(opt.max_queue)};
  if (std::find(opt.given.begin(), opt.given.end(), "--kv-disk") == opt.given.end())
    p.server_args.insert(p.server_args.end(), {"--kv-disk", (p.work_dir / "kv").string()});
  if (!opt.api_key.empty()) p.server_args.insert(p.server_args.end(), {"--api-key", opt.api_key});
  p.server_args.insert(p.server_args.end(), opt.engine_args.begin(), opt.engine_args.end());
  return p;
}

struct Sample {
  double t_s = 0;
  pid_t pid = 0;
  int64_t rss = 0;
  bool metrics = false;  // /metrics answered
  double pages_used = 0, pages_total = 0, sessions = 0, resident = 0, inflight = 0, running = 0,
         waiting = 0, disk_sessions = 0;
};

json sample_json(const Sample& s) {
  json j = {{"t_s", s.t_s}, {"pid", s.pid}, {"rss_bytes", s.rss}};
  if (s.metrics)
    j.update({{"kv_pages_used", s.pages_used},
              {"kv_pages_total", s.pages_total},
              {"sessions", s.sessions},
              {"sessions_resident", s.resident},
              {"http_requests_inflight", s.inflight},
              {"requests_running", s.running},
              {"requests_waiting", s.waiting},
              {"kv_disk_sessions", s.disk_sessions}});
  return j;
}

struct Restart {
  double t_s = 0, down_s = 0;
  int signal = 0;
  std::string exit;
  bool clean = true;    // ended as that signal should end it (SIGTERM: exit 0 in time)
  bool planned = true;  // false: the server had ended on its own (a crash)
};

// Outcome classes of the report: by status, or no response.
enum Outcome { k2xx, k4xx, k5xx, kConn, kOutcomes };
constexpr const char* kOutcomeNames[] = {"2xx", "4xx", "5xx", "connection_error"};

Outcome outcome_of(const SoakRequest& r) {
  if (r.status == 0) return kConn;
  if (r.status >= 500) return k5xx;
  if (r.status >= 400) return k4xx;
  return k2xx;
}

struct Tally {
  int64_t by[kSoakActions][kOutcomes] = {};
  int64_t total = 0, stream_broken = 0, stream_broken_outside_restarts = 0,
          conn_outside_restarts = 0;
  int64_t unexpected =
      0;  // must-fail requests that succeeded, or other outcomes no action may have
  int64_t turns_completed = 0, output_tokens = 0;
  std::vector<json> examples;

  void add(const SoakRequest& r) {
    const Outcome o = outcome_of(r);
    ++by[static_cast<int>(r.action)][o];
    ++total;
    if (r.stream_broken)
      ++stream_broken, stream_broken_outside_restarts += r.around_restart ? 0 : 1;
    if (o == kConn && !r.around_restart) ++conn_outside_restarts;
    if (!r.expected) ++unexpected;
    const bool turn = r.action == SoakAction::ChatStream || r.action == SoakAction::Chat ||
                      r.action == SoakAction::StreamDeleted;
    if (turn && o == k2xx && r.error.empty())
      ++turns_completed, output_tokens += r.completion_tokens;
    const bool worth_showing =
        o == k5xx || !r.expected || (!r.error.empty() && !r.around_restart && o != k4xx);
    if (worth_showing && examples.size() < kExamples)
      examples.push_back({{"action", soak_action_name(r.action)},
                          {"status", r.status},
                          {"t_s", r.start_s},
                          {"around_restart", r.around_restart},
                          {"error", r.error}});
  }
  int64_t outcome(Outcome o) const {
    int64_t n = 0;
    for (const auto& a : by) n += a[o];
    return n;
  }
};

// One soak: the server, the clients' tallies and the samples.
class SoakRun {
 public:
  SoakRun(const BenchServeOptions& opt, SoakPlan plan) : opt_(opt), plan_(std::move(plan)) {}

  Status start() {
    TG_ASSIGN(server_, ServerProcess::start(plan_.server_args,
                                            (plan_.work_dir / "server.log").string(), kStartupS));
    endpoint_ = *parse_base_url(fmt::format("http://127.0.0.1:{}", server_->port()));
    TG_ASSIGN(context_, fetch_context_length(endpoint_, opt_.api_key));
    t0_ = Clock::now();
    baseline_ = sample();
    if (!baseline_.metrics)
      return make_error("GET /metrics of the new server failed:\n{}", server_->log_tail(2000));
    return Status::Ok();
  }
  Status run();
  Status settle();
  json report() const;
  const SoakPlan& plan() const { return plan_; }
  const HttpEndpoint& endpoint() const { return endpoint_; }
  std::string log_tail() const { return server_ ? server_->log_tail(4000) : ""; }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  Sample sample(bool keep = true);  // keep: into the series (the report's samples and plot)
  Status restart(int sig, bool planned);
  std::vector<json> checks() const;
  json rss_lifetimes(bool& within) const;

  const BenchServeOptions& opt_;
  SoakPlan plan_;
  std::unique_ptr<ServerProcess> server_;
  HttpEndpoint endpoint_;
  int64_t context_ = 0;
  Clock::time_point t0_;
  std::atomic<uint64_t> epoch_{0};  // odd while the server is down (soak_load.h)
  mutable std::mutex mu_;           // guards tally_
  Tally tally_;
  Sample baseline_, end_of_load_, settled_;
  std::vector<Sample> samples_;
  std::vector<Restart> restarts_;
  bool final_stop_clean_ = false;
  std::string final_stop_;
  double load_s_ = 0;
  int64_t deleted_at_end_ = 0;
};

Sample SoakRun::sample(bool keep) {
  Sample s;
  s.t_s = now_s();
  s.pid = server_->pid();
  s.rss = server_->rss_bytes();
  auto m = fetch_metrics(endpoint_, opt_.api_key, 5);
  if (m) {
    auto get = [&](const char* k) { return m->count(k) ? m->at(k) : 0.0; };
    s.metrics = true;
    s.pages_used = get("tangram_kv_pages_used");
    s.pages_total = get("tangram_kv_pages_total");
    s.sessions = get("tangram_sessions");
    s.resident = get("tangram_sessions_resident");
    s.inflight = get("tangram_http_requests_inflight");
    s.running = get("tangram_requests_running");
    s.waiting = get("tangram_requests_waiting");
    s.disk_sessions = get("tangram_kv_tier_sessions{tier=\"disk\"}");
  }
  if (keep) samples_.push_back(s);
  return s;
}

// Stops the server with `sig` (or reaps one that ended on its own) and starts it again on its port.
Status SoakRun::restart(int sig, bool planned) {
  ++epoch_;
  Restart r;
  r.t_s = now_s();
  r.signal = sig;
  r.planned = planned;
  if (planned) {
    bool hung = false;
    const ChildExit e = server_->stop(sig, kStopS, hung);
    r.exit = e.describe() +
             (hung ? fmt::format(" (still running {:.0f} s after SIGTERM: killed)", kStopS) : "");
    r.clean =
        !hung && (sig == SIGKILL ? e.signaled && e.code == SIGKILL : !e.signaled && e.code == 0);
  }
  Status st = server_->restart(kStartupS);
  r.down_s = now_s() - r.t_s;
  if (!planned) r.exit = "ended on its own", r.clean = false;
  restarts_.push_back(r);
  ++epoch_;
  return st;
}

Status SoakRun::run() {
  std::atomic<bool> stop{false};
  SoakClientOptions co;
  co.endpoint = endpoint_;
  co.api_key = opt_.api_key;
  co.run_tag = fmt::format("soak{}", getpid());
  co.seed = opt_.seed;
  co.turns = plan_.turns;
  co.max_tokens = kMaxTokens;
  co.context = context_;
  co.timeout_s = opt_.timeout_s;
  co.server_epoch = [this] { return epoch_.load(); };
  std::vector<std::thread> clients;
  for (int c = 0; c < plan_.clients; ++c)
    clients.emplace_back([&, c] {
      run_soak_client(co, c, t0_, stop, [&](SoakRequest r) {
        std::lock_guard lock(mu_);
        tally_.add(r);
      });
    });
  // The control loop: samples, planned restarts, and a server that ended on its own.
  Status failed = Status::Ok();
  const double last_restart_s = 0.8 * plan_.duration_s;  // the last life is long enough to judge
  int restarts = 0;
  double next_sample = plan_.sample_every_s;
  double next_restart =
      plan_.restart_every_s > 0 ? plan_.restart_every_s : std::numeric_limits<double>::infinity();
  while (failed.ok() && now_s() < plan_.duration_s) {
    const double wake = std::min({next_sample, next_restart, plan_.duration_s});
    std::this_thread::sleep_for(
        std::chrono::duration<double>(std::max(0.0, std::min(wake - now_s(), 0.2))));
    if (server_->exited()) {
      failed = restart(0, /*planned=*/false);
    } else if (now_s() >= next_restart && next_restart < last_restart_s) {
      ++restarts;
      failed = restart(restarts % 3 == 2 ? SIGKILL : SIGTERM, /*planned=*/true);
      next_restart += plan_.restart_every_s;
    } else if (now_s() >= next_sample) {
      sample();
      next_sample += plan_.sample_every_s;
    }
  }
  stop = true;
  for (auto& t : clients) t.join();
  load_s_ = now_s();
  return failed;
}

// Forgets every session, then waits until the server has given back what they held.
Status SoakRun::settle() {
  end_of_load_ = sample();
  for (int attempt = 0;; ++attempt) {
    auto d = delete_all_sessions(endpoint_, opt_.api_key);
    if (d) {
      deleted_at_end_ += *d;
      break;
    }
    if (attempt == 3) return make_error("deleting the sessions at the end failed: {}", d.message());
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(kSettleS);
  for (;;) {
    settled_ = sample(/*keep=*/false);
    const bool drained = settled_.metrics && settled_.pages_used <= baseline_.pages_used &&
                         settled_.inflight == 0 && settled_.running == 0;
    if (drained || Clock::now() > deadline) {
      samples_.push_back(settled_);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  bool hung = false;
  const ChildExit e = server_->stop(SIGTERM, kStopS, hung);
  final_stop_clean_ = !hung && !e.signaled && e.code == 0;
  final_stop_ = e.describe() + (hung ? " (hung: killed)" : "");
  return Status::Ok();
}

// Per server process: RSS after its warm-up (its first quarter) against its last sample.
json SoakRun::rss_lifetimes(bool& within) const {
  within = true;
  json out = json::array();
  for (size_t b = 0; b < samples_.size();) {
    size_t e = b;
    while (e < samples_.size() && samples_[e].pid == samples_[b].pid) ++e;
    const double t_first = samples_[b].t_s, t_last = samples_[e - 1].t_s;
    const double warm_end = t_first + 0.25 * (t_last - t_first);
    int64_t warm = 0, peak = 0, after = 0, last = 0;
    for (size_t i = b; i < e; ++i) {
      if (samples_[i].rss <= 0) continue;
      peak = std::max(peak, samples_[i].rss);
      last = samples_[i].rss;
      if (samples_[i].t_s <= warm_end)
        warm = std::max(warm, samples_[i].rss);
      else
        ++after;
    }
    const bool judged = after >= 4 && warm > 0;  // too short a life says nothing about growth
    const int64_t growth = last - warm;
    if (judged && growth > plan_.rss_growth_bytes) within = false;
    out.push_back({{"pid", samples_[b].pid},
                   {"from_s", t_first},
                   {"to_s", t_last},
                   {"samples", e - b},
                   {"rss_after_warmup_bytes", warm},
                   {"rss_max_bytes", peak},
                   {"rss_last_bytes", last},
                   {"growth_bytes", growth},
                   {"judged", judged}});
    b = e;
  }
  return out;
}

json check(const std::string& name, bool pass, const std::string& detail) {
  return {{"check", name}, {"pass", pass}, {"detail", detail}};
}

std::vector<json> SoakRun::checks() const {
  std::vector<json> out;
  const int64_t n5xx = tally_.outcome(k5xx);
  out.push_back(check("no 5xx", n5xx == 0, fmt::format("{} requests answered 5xx", n5xx)));
  int64_t unclean = 0;
  for (const Restart& r : restarts_) unclean += r.clean ? 0 : 1;
  out.push_back(check(
      "no crash", unclean == 0 && final_stop_clean_,
      fmt::format("{} of {} restarts found the server ended unexpectedly or not cleanly; the final "
                  "SIGTERM: {}",
                  unclean, restarts_.size(), final_stop_)));
  out.push_back(
      check("must-fail requests refused", tally_.unexpected == 0,
            fmt::format("{} requests had an outcome their kind must not have", tally_.unexpected)));
  out.push_back(check(
      "KV pages back to baseline", settled_.metrics && settled_.pages_used <= baseline_.pages_used,
      fmt::format("{:g} pages in use, by {:g} sessions the server still holds, after every session "
                  "it listed was deleted (before the load: {:g} pages)",
                  settled_.pages_used, settled_.sessions, baseline_.pages_used)));
  out.push_back(check("nothing in flight",
                      settled_.metrics && settled_.inflight == 0 && settled_.running == 0,
                      fmt::format("{:g} HTTP requests in flight, {:g} running at the end",
                                  settled_.inflight, settled_.running)));
  bool within = true;
  (void)rss_lifetimes(within);
  out.push_back(check("RSS growth within bound", within,
                      fmt::format("no server process grew more than {} after its warm-up",
                                  format_bytes(static_cast<double>(plan_.rss_growth_bytes)))));
  return out;
}

json SoakRun::report() const {
  std::lock_guard lock(mu_);
  json j;
  j["tool"] = "tangram bench-serve --soak";
  j["model"] = plan_.model;
  j["settings"] = {{"duration_s", plan_.duration_s},
                   {"restart_every_s", plan_.restart_every_s},
                   {"sample_every_s", plan_.sample_every_s},
                   {"rss_growth_bound_bytes", plan_.rss_growth_bytes},
                   {"clients", plan_.clients},
                   {"turns_per_conversation", plan_.turns},
                   {"max_tokens", kMaxTokens},
                   {"seed", opt_.seed},
                   {"context", context_},
                   {"server_args", plan_.server_args}};
  json by_outcome, by_action;
  for (int o = 0; o < kOutcomes; ++o)
    by_outcome[kOutcomeNames[o]] = tally_.outcome(static_cast<Outcome>(o));
  for (int a = 0; a < kSoakActions; ++a)
    for (int o = 0; o < kOutcomes; ++o)
      by_action[std::string(soak_action_name(static_cast<SoakAction>(a)))][kOutcomeNames[o]] =
          tally_.by[a][o];
  j["requests"] = {{"total", tally_.total},
                   {"by_outcome", by_outcome},
                   {"by_action", by_action},
                   {"streams_broken", tally_.stream_broken},
                   {"streams_broken_outside_restarts", tally_.stream_broken_outside_restarts},
                   {"connection_errors_outside_restarts", tally_.conn_outside_restarts},
                   {"unexpected", tally_.unexpected},
                   {"examples", tally_.examples}};
  j["throughput"] = {
      {"load_s", load_s_},
      {"turns_completed", tally_.turns_completed},
      {"requests_per_s", load_s_ > 0 ? static_cast<double>(tally_.total) / load_s_ : 0.0},
      {"turns_per_s", load_s_ > 0 ? static_cast<double>(tally_.turns_completed) / load_s_ : 0.0},
      {"output_tokens_per_s",
       load_s_ > 0 ? static_cast<double>(tally_.output_tokens) / load_s_ : 0.0}};
  json restarts = json::array();
  for (const Restart& r : restarts_)
    restarts.push_back({{"t_s", r.t_s},
                        {"signal", !r.planned            ? "none"
                                   : r.signal == SIGKILL ? "SIGKILL"
                                                         : "SIGTERM"},
                        {"planned", r.planned},
                        {"exit", r.exit},
                        {"clean", r.clean},
                        {"down_s", r.down_s}});
  j["restarts"] = restarts;
  int64_t rss_max = 0;
  double pages_max = 0;
  for (const Sample& s : samples_)
    rss_max = std::max(rss_max, s.rss), pages_max = std::max(pages_max, s.pages_used);
  bool within = true;
  j["rss"] = {{"first_bytes", baseline_.rss},
              {"max_bytes", rss_max},
              {"last_bytes", settled_.rss},
              {"lifetimes", rss_lifetimes(within)}};
  j["kv_pages"] = {{"total", baseline_.pages_total},
                   {"baseline", baseline_.pages_used},
                   {"max", pages_max},
                   {"end_of_load", end_of_load_.pages_used},
                   {"after_delete", settled_.pages_used}};
  j["end"] = {{"sessions_deleted", deleted_at_end_},
              {"end_of_load", sample_json(end_of_load_)},
              {"after_delete", sample_json(settled_)},
              {"final_stop", final_stop_}};
  json samples = json::array();
  for (const Sample& s : samples_) samples.push_back(sample_json(s));
  j["samples"] = samples;
  const std::vector<json> cs = checks();
  j["checks"] = cs;
  const bool pass =
      std::all_of(cs.begin(), cs.end(), [](const json& c) { return c["pass"].get<bool>(); });
  j["verdict"] = pass ? "PASS" : "FAIL";
  return j;
}

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

void write_markdown(const json& j, const std::string& verdict_line, const fs::path& path) {
  std::ofstream md(path);
  const json& st = j["settings"];
  md << "# tangram bench-serve --soak report\n\n"
     << fmt::format(
            "Model `{}`; {:.0f} s of load by {} clients (conversations of {} turns, answers up to "
            "{} tokens, "
            "seed {}), a server restart every {:.0f} s (SIGTERM; every third kill -9), a sample "
            "every {:g} s.\n\n",
            j["model"].get<std::string>(), st["duration_s"].get<double>(), st["clients"].get<int>(),
            st["turns_per_conversation"].get<int>(), st["max_tokens"].get<int>(),
            st["seed"].get<uint64_t>(), st["restart_every_s"].get<double>(),
            st["sample_every_s"].get<double>())
     << "**" << verdict_line << "**\n\n| check | result | detail |\n| --- | --- | --- |\n";
  for (const json& c : j["checks"])
    md << fmt::format("| {} | {} | {} |\n", c["check"].get<std::string>(),
                      c["pass"].get<bool>() ? "pass" : "FAIL", c["detail"].get<std::string>());
  md << "\n## Requests by outcome\n\n| kind | 2xx | 4xx | 5xx | connection error |\n| --- | ---: | "
        "---: | ---: | ---: |\n";
  for (const auto& [name, o] : j["requests"]["by_action"].items())
    md << fmt::format("| {} | {} | {} | {} | {} |\n", name, o["2xx"].get<int64_t>(),
                      o["4xx"].get<int64_t>(), o["5xx"].get<int64_t>(),
                      o["connection_error"].get<int64_t>());
  const json& o = j["requests"]["by_outcome"];
  md << fmt::format("| **all** | {} | {} | {} | {} |\n\n", o["2xx"].get<int64_t>(),
                    o["4xx"].get<int64_t>(), o["5xx"].get<int64_t>(),
                    o["connection_error"].get<int64_t>())
     << fmt::format(
            "Streams broken: {} ({} outside restarts); connection errors outside restarts: {}. "
            "Throughput: {:.2f} requests/s, {:.2f} completed turns/s, {:.1f} output tokens/s.\n\n",
            j["requests"]["streams_broken"].get<int64_t>(),
            j["requests"]["streams_broken_outside_restarts"].get<int64_t>(),
            j["requests"]["connection_errors_outside_restarts"].get<int64_t>(),
            j["throughput"]["requests_per_s"].get<double>(),
            j["throughput"]["turns_per_s"].get<double>(),
            j["throughput"]["output_tokens_per_s"].get<double>());
  const json& r = j["rss"];
  const json& p = j["kv_pages"];
  md << "## Memory\n\n| | first | max | last |\n| --- | ---: | ---: | ---: |\n"
     << fmt::format("| server RSS | {} | {} | {} |\n", mib(r["first_bytes"].get<double>()),
                    mib(r["max_bytes"].get<double>()), mib(r["last_bytes"].get<double>()))
     << fmt::format("| KV pages used (of {:g}) | {:g} | {:g} | {:g} (end of load {:g}) |\n\n",
                    p["total"].get<double>(), p["baseline"].get<double>(), p["max"].get<double>(),
                    p["after_delete"].get<double>(), p["end_of_load"].get<double>())
     << "Restarts:\n\n| at (s) | signal | ended | clean | down (s) |\n| ---: | --- | --- | --- | "
        "---: |\n";
  for (const json& x : j["restarts"])
    md << fmt::format("| {:.1f} | {} | {} | {} | {:.2f} |\n", x["t_s"].get<double>(),
                      x["signal"].get<std::string>(), x["exit"].get<std::string>(),
                      x["clean"].get<bool>() ? "yes" : "NO", x["down_s"].get<double>());
  md << "\nPlot: `soak.svg` (RSS and KV pages over time). Every sample, restart and failed "
        "request: `report.json`; "
        "the server's own log: `server.log`.\n";
}

Status write_plot(const json& j, const fs::path& path) {
  LinePlot rss, pages;
  rss.title = "Server RSS over the soak (drops are restarts)";
  rss.x_label = "time since the start (s)";
  rss.y_label = "RSS (MiB)";
  pages.title = "KV pages in use over the soak";
  pages.x_label = "time since the start (s)";
  pages.y_label = "KV pages used (pages)";
  PlotSeries r{"server RSS (MiB)", {}, {}}, u{"KV pages used", {}, {}};
  for (const json& s : j["samples"]) {
    const double t = s["t_s"].get<double>();
    if (s["rss_bytes"].get<int64_t>() > 0)
      r.x.push_back(t), r.y.push_back(s["rss_bytes"].get<double>() / 1048576.0);
    if (s.contains("kv_pages_used"))
      u.x.push_back(t), u.y.push_back(s["kv_pages_used"].get<double>());
  }
  rss.series.push_back(std::move(r));
  pages.series.push_back(std::move(u));
  return write_svg_panels({rss, pages}, path.string());
}

}  // namespace

Result<bool> run_soak(const BenchServeOptions& opt) {
  TG_TRY(check_soak_flags(opt));
  TG_ASSIGN(SoakPlan plan, plan_soak(opt));
  std::error_code ec;
  fs::create_directories(opt.output.out_dir, ec);
  if (ec) return make_error("cannot create {}: {}", opt.output.out_dir, ec.message());
  const fs::path out(opt.output.out_dir);
  SoakRun soak(opt, std::move(plan));
  const fs::path work = soak.plan().work_dir;
  auto finish = [&](Result<bool> outcome) {
    fs::copy_file(work / "server.log", out / "server.log", fs::copy_options::overwrite_existing,
                  ec);
    fs::remove_all(work, ec);
    return outcome;
  };
  if (Status st = soak.start(); !st) return finish(Error{st.message()});
  fmt::print(
      "tangram bench-serve --soak: {} for {:.0f} s, {} clients, restarts every {:.0f} s, server "
      "{}\n",
      soak.plan().model, soak.plan().duration_s, soak.plan().clients, soak.plan().restart_every_s,
      soak.endpoint().origin);
  std::fflush(stdout);
  if (Status st = soak.run(); !st)
    return finish(make_error("{}\n{}", st.message(), soak.log_tail()));
  if (Status st = soak.settle(); !st) return finish(Error{st.message()});
  const json j = soak.report();
  const std::string verdict = j["verdict"].get<std::string>();
  std::vector<std::string> failed;
  for (const json& c : j["checks"])
    if (!c["pass"].get<bool>())
      failed.push_back(c["check"].get<std::string>() + ": " + c["detail"].get<std::string>());
  const std::string line =
      fmt::format("soak verdict: {}{}", verdict,
                  failed.empty() ? "" : " (" + fmt::format("{}", fmt::join(failed, "; ")) + ")");
  std::ofstream(out / "report.json") << j.dump(2) << "\n";
  write_markdown(j, line, out / "report.md");
  if (Status st = write_plot(j, out / "soak.svg"); !st) return finish(Error{st.message()});
  const json& o = j["requests"]["by_outcome"];
  fmt::print(
      "requests: {} (2xx {}, 4xx {}, 5xx {}, connection errors {}); restarts {}; RSS first {} max "
      "{} last {}; "
      "KV pages max {:g}, after deleting everything {:g}\n",
      j["requests"]["total"].get<int64_t>(), o["2xx"].get<int64_t>(), o["4xx"].get<int64_t>(),
      o["5xx"].get<int64_t>(), o["connection_error"].get<int64_t>(), j["restarts"].size(),
      mib(j["rss"]["first_bytes"].get<double>()), mib(j["rss"]["max_bytes"].get<double>()),
      mib(j["rss"]["last_bytes"].get<double>()), j["kv_pages"]["max"].get<double>(),
      j["kv_pages"]["after_delete"].get<double>());
  fmt::print("report: {}/report.md, report.json, soak.svg, server.log\n{}\n", opt.output.out_dir,
             line);
  return finish(verdict == "PASS");
}

}  // namespace tangram::bench
