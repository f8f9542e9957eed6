// Constructors of the individual scorers (internal to src/compress; make_scorer is the public
// entry point). Each checks the options it uses and returns an Error naming the bad one.
#pragma once

#include <memory>

#include "common/result.h"
#include "compress/scorer.h"

namespace tangram {

Result<std::unique_ptr<Scorer>> make_snapkv_scorer(const ScorerOptions& options);
Result<std::unique_ptr<Scorer>> make_tova_scorer(const ScorerOptions& options);
Result<std::unique_ptr<Scorer>> make_keydiff_scorer(const ScorerOptions& options);
Result<std::unique_ptr<Scorer>> make_streamingllm_scorer(const ScorerOptions& options);
Result<std::unique_ptr<Scorer>> make_expected_attention_scorer(const ScorerOptions& options);
Result<std::unique_ptr<Scorer>> make_kvzip_scorer(const ScorerOptions& options);

}  // namespace tangram
