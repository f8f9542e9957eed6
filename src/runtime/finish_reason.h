// Why a generation ended, as reported to callers (and, later, in OpenAI's finish_reason).
#pragma once

#include <string_view>

namespace tangram {

enum class FinishReason {
  Stop,       // an end-of-generation token or a stop string
  Length,     // max_tokens reached or the context is full
  Cancelled,  // the caller cancelled the request
  Error,      // the request failed (the result carries the message)
};

constexpr std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "stop";
}

}  // namespace tangram
