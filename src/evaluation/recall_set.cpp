#include "evaluation/recall_set.h"

#include "common/file_text.h"
#include "common/json_parse.h"

namespace tangram {

namespace {

using nlohmann::json;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

Result<RecallMessage> parse_message(const json& m, const RecallMessage* previous) {
  if (!m.is_object()) return make_error("a message is not an object");
  RecallMessage out;
  bool has_role = false, has_content = false;
  for (const auto& [key, value] : m.items()) {
    if (key == "role" || key == "content") {
      if (!value.is_string()) return make_error("\"{}\" is not a string", key);
      (key == "role" ? out.role : out.content) = value.get<std::string>();
      (key == "role" ? has_role : has_content) = true;
    } else if (key == "kind") {
      out.answer = value.is_string() && value.get<std::string>() == "answer";
    }
  }
  if (!has_role || !has_content) return make_error("a message needs \"role\" and \"content\"");
  if (out.role != "system" && out.role != "user" && out.role != "assistant")
    return make_error("unknown role '{}' (system, user or assistant)", out.role);
  if (out.answer && out.role != "assistant")
    return make_error("an \"answer\" message must be the assistant's, not the {}'s", out.role);
  if (out.answer && (previous == nullptr || previous->role != "user"))
    return make_error("an \"answer\" message must follow the user message it answers");
  return out;
}

Result<RecallConversation> parse_conversation(const json& j) {
  if (!j.is_object()) return make_error("not a JSON object");
  RecallConversation c;
  bool has_kind = false, has_messages = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "seed") {
      if (!value.is_number_unsigned()) return make_error("\"seed\" is not a non-negative integer");
      c.seed = value.get<uint64_t>();
    } else if (key == "kind") {
      if (!value.is_string()) return make_error("\"kind\" is not a string");
      c.kind = value.get<std::string>();
      has_kind = true;
    } else if (key == "messages") {
      if (!value.is_array() || value.empty())
        return make_error("\"messages\" is not a non-empty array");
      if (value.size() > kMaxRecallMessages)
        return make_error("{} messages, more than {}", value.size(), kMaxRecallMessages);
      for (const json& m : value) {
        const RecallMessage* previous = c.messages.empty() ? nullptr : &c.messages.back();
        auto message = parse_message(m, previous);
        if (!message) return make_error("message {}: {}", c.messages.size() + 1, message.message());
        c.messages.push_back(std::move(message).value());
      }
      has_messages = true;
    }
  }
  if (!has_kind) return make_error("no \"kind\"");
  if (!has_messages) return make_error("no \"messages\"");
  return c;
}

}  // namespace

int64_t RecallConversation::questions() const {
  int64_t n = 0;
  for (const RecallMessage& m : messages) n += m.answer ? 1 : 0;
  return n;
}

Result<std::vector<RecallConversation>> parse_recall_set(std::string_view text) {
  std::vector<RecallConversation> out;
  int64_t questions = 0;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto j = parse_json(line);
    if (!j) return make_error("line {}: {}", line_no, j.message());
    auto c = parse_conversation(*j);
    if (!c) return make_error("line {}: {}", line_no, c.message());
    questions += c->questions();
    out.push_back(std::move(c).value());
  }
  if (questions == 0) return make_error("no question to score (no message of kind \"answer\")");
  return out;
}

Result<std::vector<RecallConversation>> load_recall_set(const std::string& path) {
  TG_ASSIGN(const std::string text, read_file_text(path, "the recall set", kMaxRecallFileBytes));
  auto set = parse_recall_set(text);
  if (!set) return make_error("{}: {}", path, set.message());
  return set;
}

std::string normalize_recall_answer(std::string_view text) {
  std::string out;
  bool pending_space = false;
  for (char c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  if (!out.empty() && out.back() == '.') {
    out.pop_back();
    while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  return out;
}

bool recall_match(std::string_view answer, std::string_view expected) {
  return normalize_recall_answer(answer) == normalize_recall_answer(expected);
}

}  // namespace tangram
