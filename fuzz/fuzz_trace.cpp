// Workload trace reader: arbitrary bytes as a JSONL trace. Refused with "name:LINE: why" or
// loaded into conversations that pass validate_conversation, as save_trace requires.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "evaluation/trace.h"
#include "fuzz_support.h"

using namespace tangram;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto trace =
      parse_trace(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jsonl");
  if (!trace.ok()) {
    TG_FUZZ_CHECK(trace.message().rfind("fuzz.jsonl:", 0) == 0);
    return 0;
  }
  for (const Conversation& c : *trace) TG_FUZZ_CHECK(validate_conversation(c).ok());
  return 0;
}
