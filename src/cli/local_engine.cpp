#include "cli/local_engine.h"

#include <algorithm>

#include "launch/profile_settings.h"

namespace tangram::cli {

Result<LocalEngine> start_local_engine(const std::string& model_path, const EngineSettings& flags) {
  TG_ASSIGN(EngineOptions engine_opts, to_engine_options(flags));
  LocalEngine out;
  TG_ASSIGN(out.loaded, load_model_for_serving(model_path, "", "", 0, "", flags.threads,
                                               model_options_for(flags)));
  // The engine reads the profile while it is created: a temporary one may go afterwards.
  TG_ASSIGN(ResolvedProfile profile, resolve_kv_profile(engine_opts, flags, *out.loaded.model,
                                                        *out.loaded.tokenizer, model_path));
  TG_ASSIGN(out.engine, Engine::create(*out.loaded.model, *out.loaded.tokenizer, engine_opts));
  return out;
}

GenerationRates generation_rates(const RequestResult& r, int64_t prefilled_tokens) {
  GenerationRates rates;
  if (r.timing.prefill_seconds > 0)
    rates.prefill_tok_s = static_cast<double>(prefilled_tokens) / r.timing.prefill_seconds;
  const double n_dec = static_cast<double>(std::max<int64_t>(r.usage.completion_tokens, 1) - 1);
  if (r.timing.decode_seconds > 0) rates.decode_tok_s = n_dec / r.timing.decode_seconds;
  return rates;
}

}  // namespace tangram::cli
