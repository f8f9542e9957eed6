// JSONL traces of multi-turn conversations, to replay recorded workloads in `tangram bench`.
//
// JSONL trace format (save_trace / load_trace), one conversation per line:
//
//   {"id": "chat-7", "arrival_s": 1.25,
//    "turns": [{"user": [812, 77, 4051], "output_tokens": 32, "think_time_s": 0},
//              {"user_text": "And the second name?", "output_tokens": 16, "think_time_s": 2.5}]}
//
//   id            string, optional (default "line-N"); unique within the file
//   arrival_s     number >= 0, optional (default 0): open-loop arrival time of the session,
//                 seconds from the start of the run; 0 for closed-loop traces
//   turns         non-empty array of turn objects:
//     user          array of token ids (integers >= 0)            exactly one of user / user_text
//     user_text     string, to be tokenised by the caller
//     output_tokens integer in [1, 2^24]: tokens to generate for this turn
//     think_time_s  number >= 0, optional (default 0): the user's pause after the previous answer
//                   before sending this turn
//   Blank lines are skipped. Unknown keys are errors (they are most often typos); so are all
//   malformed lines, reported as "path:LINE: what is wrong".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "evaluation/workload.h"

namespace tangram {

// Writes the JSONL trace described above (tokens as "user", text as "user_text"). Each conversation
// must pass validate_conversation and ids must be unique, so whatever is saved loads back equal.
Status save_trace(const std::vector<Conversation>& conversations, const std::string& path);
// Reads a JSONL trace; the first malformed line is reported with its line number.
Result<std::vector<Conversation>> load_trace(const std::string& path);
// The same from the file's text; `name` stands in for the path in messages.
Result<std::vector<Conversation>> parse_trace(std::string_view text, const std::string& name);

}  // namespace tangram
