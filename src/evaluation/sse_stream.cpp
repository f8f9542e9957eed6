#include "evaluation/sse_stream.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace tangram {
namespace {

using nlohmann::json;

// A non-negative integer field of j, or -1 when absent or of another type (never throws).
int64_t count_field(const json& j, const char* key) {
  if (!j.is_object()) return -1;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return -1;
  const auto v = it->get<int64_t>();
  return v < 0 ? -1 : v;
}

}  // namespace

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    std::string_view piece = bytes.substr(start, i - start);
    if (!partial_.empty()) {
      partial_.append(piece);
      std::string l = std::move(partial_);
      partial_.clear();
      if (!l.empty() && l.back() == '\r') l.pop_back();
      line(l, out);
    } else {
      if (!piece.empty() && piece.back() == '\r') piece.remove_suffix(1);
      line(piece, out);
    }
    start = i + 1;
  }
  partial_.append(bytes.substr(start));
  return out;
}

void SseParser::line(std::string_view l, std::vector<std::string>& out) {
  if (l.empty()) {  // end of event
    if (has_data_) out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (l.front() == ':') {
    ++comments_;
    return;
  }
  const size_t colon = l.find(':');
  const std::string_view field = l.substr(0, colon);
  if (field != "data") return;  // event:, id:, retry: and unknown fields do not matter here
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

int64_t CompletionStreamReader::feed(std::string_view bytes) {
  int64_t pieces = 0;
  for (const std::string& data : parser_.feed(bytes)) pieces += event(data);
  return pieces;
}

int64_t CompletionStreamReader::event(const std::string& data) {
  if (done_ || !error_.empty()) return 0;  // nothing after [DONE] or a failure counts
  if (data == "[DONE]") {
    done_ = true;
    return 0;
  }
  const json j = parse_json_or_discarded(data);
  if (j.is_discarded() || !j.is_object()) {
    error_ = "the stream sent an event that is not a JSON object: " + data.substr(0, 200);
    return 0;
  }
  if (auto e = j.find("error"); e != j.end()) {
    std::string msg = "the server reported an error mid-stream";
    if (e->is_object())
      if (auto m = e->find("message"); m != e->end() && m->is_string()) msg = m->get<std::string>();
    error_ = msg;
    return 0;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    const int64_t p = count_field(*u, "prompt_tokens"), c = count_field(*u, "completion_tokens");
    if (p < 0 || c < 0) {
      error_ = "a usage chunk without prompt_tokens / completion_tokens";
      return 0;
    }
    prompt_tokens_ = p;
    completion_tokens_ = c;
    cached_tokens_ = 0;  // servers without prompt caching leave the details out
    if (auto d = u->find("prompt_tokens_details"); d != u->end())
      cached_tokens_ = std::max<int64_t>(0, count_field(*d, "cached_tokens"));
    has_usage_ = true;
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) {
    error_ = "a chunk without a choices array";
    return 0;
  }
  int64_t pieces = 0;
  for (const json& c : *choices) {
    if (!c.is_object()) continue;
    // A completion chunk carries "text"; a chat chunk (chat.completion.chunk) "delta.content".
    const json* t = nullptr;
    if (auto x = c.find("text"); x != c.end()) t = &*x;
    if (auto d = c.find("delta"); !t && d != c.end() && d->is_object())
      if (auto x = d->find("content"); x != d->end()) t = &*x;
    if (t && t->is_string()) {
      const auto& s = t->get_ref<const std::string&>();
      if (!s.empty()) {
        text_ += s;
        ++pieces;
      }
    }
    if (auto f = c.find("finish_reason"); f != c.end() && f->is_string())
      finish_reason_ = f->get<std::string>();
  }
  text_pieces_ += pieces;
  return pieces;
}

}  // namespace tangram
