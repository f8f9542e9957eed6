// Whole files read into memory, with a cap, so that a wrong path (a disk image, /dev/zero, a
// model passed where a text belongs) gets a clear error instead of exhausting memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace tangram {

// Generous for every text the engine reads whole (vocabularies, profiles, traces, evaluation
// sets, perplexity corpora); far below what would strain a serving machine.
inline constexpr size_t kMaxTextFileBytes = size_t{512} << 20;

// The bytes of `path`. `what` names the file in errors ("the recall set", "the API key file").
// Works on pipes and other files whose size is unknown beforehand: the cap is checked as the
// bytes arrive.
Result<std::string> read_file_text(const std::string& path, std::string_view what = "file",
                                   size_t max_bytes = kMaxTextFileBytes);

}  // namespace tangram
