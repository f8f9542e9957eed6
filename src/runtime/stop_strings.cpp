#include "runtime/stop_strings.h"

#include <algorithm>

namespace tangram {

namespace {

// Bytes at the end of `s` that start a UTF-8 character whose remaining bytes have not arrived.
// Malformed bytes are not held: they cannot be completed, so waiting would not help.
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto byte = static_cast<unsigned char>(s[s.size() - back]);
    if ((byte & 0xC0u) == 0x80u) continue;  // continuation byte: keep looking for the lead
    size_t length = 1;
    if ((byte & 0xE0u) == 0xC0u)
      length = 2;
    else if ((byte & 0xF0u) == 0xE0u)
      length = 3;
    else if ((byte & 0xF8u) == 0xF0u)
      length = 4;
    return length > back ? back : 0;
  }
  return 0;
}

}  // namespace

StopStringMatcher::StopStringMatcher(const std::vector<std::string>& stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& text = stop_strings[i];
    if (text.empty()) continue;
    Pattern p;
    p.text = text;
    p.index = static_cast<int>(i);
    p.fallback.assign(text.size(), 0);
    for (size_t j = 1, k = 0; j < text.size(); ++j) {
      while (k > 0 && text[j] != text[k]) k = p.fallback[k - 1];
      if (text[j] == text[k]) ++k;
      p.fallback[j] = k;
    }
    patterns_.push_back(std::move(p));
  }
}

size_t StopStringMatcher::advance(const Pattern& p, size_t state, char byte) {
  while (state > 0 && p.text[state] != byte) state = p.fallback[state - 1];
  return p.text[state] == byte ? state + 1 : 0;
}

StopStringMatcher::Step StopStringMatcher::feed(std::string_view piece) {
  Step step;
  if (stopped()) return step;
  for (const char byte : piece) {
    pending_.push_back(byte);
    const Pattern* matched = nullptr;
    for (Pattern& p : patterns_) {
      p.state = advance(p, p.state, byte);
      // Longest wins among those completing on this byte; list order breaks exact ties.
      if (p.state == p.text.size() &&
          (matched == nullptr || p.text.size() > matched->text.size())) {
        matched = &p;
      }
    }
    if (matched != nullptr) {
      // pending_ always holds at least max(state) bytes, so the whole match is inside it.
      step.text = pending_.substr(0, pending_.size() - matched->text.size());
      step.stopped = true;
      step.stop_index = stop_index_ = matched->index;
      pending_.clear();
      return step;
    }
  }
  size_t hold = incomplete_utf8_tail(pending_);
  for (const Pattern& p : patterns_) hold = std::max(hold, p.state);
  const size_t ready = pending_.size() - hold;
  step.text = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return step;
}

std::string StopStringMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  for (Pattern& p : patterns_) p.state = 0;
  return rest;
}

}  // namespace tangram
