#include "profiling/profiler.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_parse.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "gguf/gguf_file.h"
#include "scheduler/scheduler.h"

namespace tangram {
namespace {

namespace fs = std::filesystem;

// Samples of one file: JSON lines ({"text": ...}) or plain text split at lines "---"; text
// without separators is cut into pieces of sample_tokens tokens.
Result<std::vector<PilotSample>> read_sample_file(const std::string& path, int kind,
                                                  const Tokenizer& tok, int64_t sample_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read the samples file {}", path);
  std::vector<std::string> texts;
  std::string line;
  const bool jsonl = path.size() > 6 && path.substr(path.size() - 6) == ".jsonl";
  std::string current;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (jsonl) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto j = parse_json_or_discarded(line);
      if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
        return make_error("{} line {}: expected a JSON object with a \"text\" string", path,
                          line_no);
      texts.push_back(j["text"].get<std::string>());
    } else if (line == "---" || line == "---\r") {
      if (!current.empty()) texts.push_back(std::move(current));
      current.clear();
    } else {
      current += line;
      current += '\n';
    }
  }
  if (!current.empty()) texts.push_back(std::move(current));
  std::vector<PilotSample> out;
  for (const std::string& t : texts) {
    std::vector<int32_t> ids = tok.encode(t, /*add_special=*/true, /*parse_special=*/false);
    if (texts.size() == 1 && static_cast<int64_t>(ids.size()) > sample_tokens) {
      for (size_t b = 0; b + static_cast<size_t>(sample_tokens) <= ids.size();
           b += static_cast<size_t>(sample_tokens))
        out.push_back(PilotSample{
            std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(b),
                                 ids.begin() + static_cast<std::ptrdiff_t>(b) + sample_tokens),
            kind});
    } else if (!ids.empty()) {
      if (static_cast<int64_t>(ids.size()) > sample_tokens)
        ids.resize(static_cast<size_t>(sample_tokens));
      out.push_back(PilotSample{std::move(ids), kind});
    }
  }
  if (out.empty()) return make_error("{} holds no samples", path);
  return out;
}

// Context-only retention of one head (profile.h): what it kept beyond the sink and the window,
// over the evictable context.
double retention(int64_t kept, int64_t total, int sink, int window) {
  const double r = static_cast<double>(std::max<int64_t>(kept - sink - window, 0)) /
                   static_cast<double>(std::max<int64_t>(total - sink, 1));
  return std::clamp(r, 0.0, 1.0);
}

// Puts the kinds of text in turn (kind 0, kind 1, ..., kind 0, ...) so a cap on the number of
// samples keeps every kind.
std::vector<PilotSample> interleave_kinds(std::vector<PilotSample> samples) {
  std::vector<std::vector<PilotSample>> kinds;
  for (auto& s : samples) {
    if (kinds.size() <= static_cast<size_t>(s.kind)) kinds.resize(static_cast<size_t>(s.kind) + 1);
    kinds[static_cast<size_t>(s.kind)].push_back(std::move(s));
  }
  std::vector<PilotSample> out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (auto& k : kinds)
      if (i < k.size()) {
        out.push_back(std::move(k[i]));
        any = true;
      }
    if (!any) break;
  }
  return out;
}

// A scheduler that compresses every turn in one shot with the dynamic policy, each head its own
// page group so that kept lengths are exact.
SchedulerOptions profiling_scheduler_options(const ProfilerSettings& opt, const Model& model,
                                             BudgetLevel level) {
  const ModelConfig& cfg = model.config();
  const int64_t ctx_limit = std::min<int64_t>(cfg.context_length, opt.sample_tokens + 8);
  SchedulerOptions so;
  so.page_group_size = 1;  // every head its own group: exact kept lengths
  so.page_tokens = 16;
  so.kv_type = KvType::F16;
  so.prefault = false;
  so.step_tokens = std::min<int64_t>(
      so.step_tokens, model.max_batch());  // the model serving may have a smaller batch
  so.prefill_chunk = std::min(so.prefill_chunk, so.step_tokens);
  so.max_context = ctx_limit;
  const double kv_per_token =
      static_cast<double>(cfg.n_layers) * cfg.n_kv_head * (cfg.head_dim + cfg.head_dim_v) * 2.0;
  so.kv_memory =
      static_cast<size_t>(kv_per_token * static_cast<double>(ctx_limit + 64) * 1.3) + (16u << 20);
  CompressionOptions& co = so.compression;
  co.policy = KvPolicy::Dynamic;
  co.ratio = opt.ratio;
  co.level = level;
  co.sink = opt.sink;
  co.window = opt.window;
  co.chunk = std::max<int64_t>(opt.sample_tokens + 1, opt.window + 1);  // one-shot per turn
  co.scorer.name = opt.scorer;
  return so;
}

// The profile's description (model, shape, settings), before any sample is measured.
RetentionProfile empty_profile(const ProfilerSettings& opt, const Model& model, BudgetLevel level) {
  const ModelConfig& cfg = model.config();
  RetentionProfile prof;
  prof.scorer = opt.scorer;
  prof.model = model.gguf().get_string("general.name").value_or(opt.model_name);
  prof.level = level == BudgetLevel::CrossLayer ? "cross-layer" : "per-layer";
  prof.n_layers = cfg.n_layers;
  prof.n_kv_head = cfg.n_kv_head;
  prof.n_physical_layers = cfg.n_layers;
  for (int l = 0; l < cfg.n_layers; ++l) prof.layer_ids.push_back(l);
  prof.base_ratio = opt.ratio;
  prof.sink = opt.sink;
  prof.window = opt.window;
  return prof;
}

// Runs every sample as a conversation of opt.turns growing prefixes and records each head's kept
// length after the first and the last turn; the last turn's figures also go into prof's raw data.
Status measure_samples(Scheduler& sched, const std::vector<PilotSample>& samples,
                       const ProfilerSettings& opt, RetentionProfile& prof, TurnRetention& turns) {
  const int L = prof.n_layers, H = prof.n_kv_head;
  const size_t heads = static_cast<size_t>(L) * static_cast<size_t>(H);
  ProgressBar bar("profiling", static_cast<int64_t>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    const PilotSample& smp = samples[i];
    const std::string sid = fmt::format("profile-{}", i);
    for (int t = 0; t < opt.turns; ++t) {
      const size_t len =
          smp.tokens.size() * static_cast<size_t>(t + 1) / static_cast<size_t>(opt.turns);
      if (len < 2) continue;
      Request r;
      r.prompt.assign(smp.tokens.begin(), smp.tokens.begin() + static_cast<std::ptrdiff_t>(len));
      r.params.temperature = 0;
      r.params.max_tokens = 1;
      r.session_id = sid;
      std::string error;
      r.on_finish = [&error](const RequestResult& res) {
        if (res.finish == FinishReason::Error) error = res.error;
      };
      if (auto id = sched.submit(std::move(r)); !id) return id.error();
      sched.run_until_idle();
      if (!error.empty()) return Error{error};
      const Session* ses = sched.sessions().find(sid);
      if (ses == nullptr || !ses->cache) return make_error("the profiled session lost its cache");
      const int64_t total = ses->cache->n_positions();
      std::vector<double> ret(heads);
      std::vector<int32_t> kept(heads);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const int64_t k = ses->cache->length(l, h);
          kept[static_cast<size_t>(l * H + h)] = static_cast<int32_t>(k);
          ret[static_cast<size_t>(l * H + h)] = retention(k, total, opt.sink, opt.window);
        }
      if (t == 0) turns.first_turn.push_back(ret);
      if (t == opt.turns - 1) {
        turns.last_turn.push_back(ret);
        prof.raw_ratio.insert(prof.raw_ratio.end(), ret.begin(), ret.end());
        prof.raw_kept.insert(prof.raw_kept.end(), kept.begin(), kept.end());
        prof.sample_meta.insert(prof.sample_meta.end(),
                                {static_cast<int32_t>(total - opt.sink), opt.sink,
                                 static_cast<int32_t>(total), opt.window});
      }
    }
    sched.drop_session(sid);
    bar.add();
  }
  return Status::Ok();
}

// Median, p90, mean and standard deviation over samples of each head's retention.
void set_head_statistics(RetentionProfile& prof,
                         const std::vector<std::vector<double>>& last_turn) {
  const size_t heads = static_cast<size_t>(prof.n_layers) * static_cast<size_t>(prof.n_kv_head);
  prof.median.resize(heads);
  prof.p90.resize(heads);
  prof.std_dev.resize(heads);
  prof.mean.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    std::vector<double> v;
    for (const auto& s : last_turn) v.push_back(s[h]);
    std::sort(v.begin(), v.end());
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    auto quantile = [&](double q) {
      const double pos = q * static_cast<double>(v.size() - 1);
      const auto lo = static_cast<size_t>(std::floor(pos));
      const size_t hi = std::min(lo + 1, v.size() - 1);
      return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    };
    prof.median[h] = static_cast<float>(quantile(0.5));
    prof.p90[h] = static_cast<float>(quantile(0.9));
    prof.mean[h] = static_cast<float>(mean);
    prof.std_dev[h] = static_cast<float>(std::sqrt(var / static_cast<double>(v.size())));
  }
}

}  // namespace

Result<std::vector<fs::path>> calibration_files(const std::vector<fs::path>& folders) {
  std::string looked;
  for (const fs::path& dir : folders) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.is_regular_file(ec) && entry.path().extension() == ".txt")
        files.push_back(entry.path());
    looked += (looked.empty() ? "" : " and ") + dir.string();
    if (ec || files.empty()) continue;
    std::sort(files.begin(), files.end());
    return files;
  }
  return make_error(
      "tangram's calibration text is missing (looked in {}): pass --samples FILE (or "
      "--kv-profile FILE to serve)",
      looked.empty() ? std::string("no folder") : looked);
}

Result<std::vector<PilotSample>> read_pilot_samples(const std::vector<std::string>& files,
                                                    const Tokenizer& tok, int64_t sample_tokens,
                                                    int n_samples) {
  std::vector<PilotSample> samples;
  for (size_t f = 0; f < files.size(); ++f) {
    TG_ASSIGN(std::vector<PilotSample> got,
              read_sample_file(files[f], static_cast<int>(f), tok, sample_tokens));
    samples.insert(samples.end(), got.begin(), got.end());
  }
  samples = interleave_kinds(std::move(samples));
  if (static_cast<int>(samples.size()) > n_samples) samples.resize(static_cast<size_t>(n_samples));
  return samples;
}

Result<MeasuredProfile> measure_profile(Model& model, const Tokenizer& tok,
                                        const std::vector<PilotSample>& samples,
                                        const ProfilerSettings& opt) {
  if (opt.turns < 1) return make_error("--turns must be at least 1");
  TG_ASSIGN(BudgetLevel level, parse_budget_level(opt.level));
  ThreadPool pool(opt.threads);
  TG_ASSIGN(std::unique_ptr<Scheduler> sched,
            Scheduler::create(model, tok, pool, profiling_scheduler_options(opt, model, level)));
  MeasuredProfile out;
  out.profile = empty_profile(opt, model, level);
  TG_TRY(measure_samples(*sched, samples, opt, out.profile, out.turns));
  out.profile.n_samples = static_cast<int>(out.turns.last_turn.size());
  if (out.profile.n_samples < 2)
    return make_error("profiling needs at least 2 samples; give more text or --samples files");
  set_head_statistics(out.profile, out.turns.last_turn);
  return out;
}

}  // namespace tangram
