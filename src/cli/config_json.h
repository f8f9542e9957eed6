// The resolved configuration of a command as JSON, for `--dry-run`: what the command would run
// with after every flag and default is applied, with nothing loaded. A flag that leaves this
// unchanged is one the command ignores (tests/cli/flags_test.cpp checks every flag of --help).
#pragma once

#include <nlohmann/json.hpp>

#include "benchmark/multiturn_bench.h"
#include "cli/commands.h"
#include "common/result.h"
#include "engine/engine.h"

namespace tangram::cli {

// The engine's options (batching, KV memory and tiers, compression). One function so that a
// change to EngineOptions/SchedulerOptions has one place to follow.
nlohmann::json engine_options_json(const EngineOptions& o);
nlohmann::json sampling_json(const SamplingParams& s);
// The engine flags converted as the command converts them (errors are the command's errors).
Result<nlohmann::json> engine_flags_json(const EngineSettings& flags);

Result<nlohmann::json> plan_json(const InfoOptions& o);
Result<nlohmann::json> plan_json(const TokenizeOptions& o);
Result<nlohmann::json> plan_json(const RunOptions& o);
Result<nlohmann::json> plan_json(const ChatOptions& o);
Result<nlohmann::json> plan_json(const ServeOptions& o);
Result<nlohmann::json> plan_json(const ProfileOptions& o);
Result<nlohmann::json> plan_json(const MkmodelOptions& o);
Result<nlohmann::json> plan_json(const ClusterOptions& o);
Result<nlohmann::json> plan_json(const PerplexityCmdOptions& o);
Result<nlohmann::json> plan_json(const RecallCmdOptions& o);
Result<nlohmann::json> plan_json(const BenchOptions& o);
Result<nlohmann::json> plan_json(const BenchModelOptions& o);
Result<nlohmann::json> plan_json(const BenchServeOptions& o);

}  // namespace tangram::cli
