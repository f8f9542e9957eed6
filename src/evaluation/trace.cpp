#include "evaluation/trace.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/file_text.h"
#include "common/json_parse.h"

namespace tangram {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

// An integer JSON value, or an error naming `what` (floats and out-of-range values rejected).
Result<int64_t> read_integer(const json& v, const std::string& what, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return make_error("{} must be an integer", what);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return make_error("{} must be <= {} (got {})", what, hi, u);
    return static_cast<int64_t>(u);
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) return make_error("{} must be in [{}, {}] (got {})", what, lo, hi, i);
  return i;
}

Result<double> read_seconds(const json& v, const std::string& what) {
  if (!v.is_number()) return make_error("{} must be a number", what);
  const double d = v.get<double>();
  if (!(d >= 0.0)) return make_error("{} must be >= 0 (got {})", what, d);
  return d;
}

Result<Turn> parse_turn(const json& j, size_t index) {
  const std::string where = fmt::format("turn {}", index);
  if (!j.is_object()) return make_error("{}: must be an object", where);
  Turn turn;
  bool has_user = false, has_text = false, has_output = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "user") {
      if (!value.is_array()) return make_error("{}: \"user\" must be an array of token ids", where);
      turn.user_tokens.reserve(value.size());
      for (size_t k = 0; k < value.size(); ++k) {
        const std::string what = fmt::format("{}: \"user\"[{}]", where, k);
        TG_ASSIGN(const int64_t id, read_integer(value[k], what, 0, kMaxTokenId));
        turn.user_tokens.push_back(static_cast<int32_t>(id));
      }
      has_user = true;
    } else if (key == "user_text") {
      if (!value.is_string()) return make_error("{}: \"user_text\" must be a string", where);
      turn.user_text = value.get<std::string>();
      has_text = true;
    } else if (key == "output_tokens") {
      TG_ASSIGN(turn.output_tokens, read_integer(value, where + ": \"output_tokens\"", 1,
                                                 std::numeric_limits<int64_t>::max()));
      has_output = true;
    } else if (key == "think_time_s") {
      TG_ASSIGN(turn.think_time_s, read_seconds(value, where + ": \"think_time_s\""));
    } else {
      return make_error(
          "{}: unknown key \"{}\" (expected user, user_text, output_tokens, "
          "think_time_s)",
          where, key);
    }
  }
  if (has_user == has_text)
    return make_error("{}: needs exactly one of \"user\" or \"user_text\"", where);
  if (!has_output) return make_error("{}: missing \"output_tokens\"", where);
  return turn;
}

Result<Conversation> parse_conversation(const json& j, size_t line_no) {
  if (!j.is_object()) return make_error("a line must hold one JSON object");
  Conversation c;
  c.id = fmt::format("line-{}", line_no);
  bool has_turns = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "id") {
      if (!value.is_string()) return make_error("\"id\" must be a string");
      c.id = value.get<std::string>();
    } else if (key == "arrival_s") {
      TG_ASSIGN(c.arrival_s, read_seconds(value, "\"arrival_s\""));
    } else if (key == "turns") {
      if (!value.is_array()) return make_error("\"turns\" must be an array");
      for (size_t t = 0; t < value.size(); ++t) {
        TG_ASSIGN(Turn turn, parse_turn(value[t], t));
        c.turns.push_back(std::move(turn));
      }
      has_turns = true;
    } else {
      return make_error("unknown key \"{}\" (expected id, arrival_s, turns)", key);
    }
  }
  if (!has_turns) return make_error("missing \"turns\"");
  TG_TRY(validate_conversation(c));
  return c;
}

json conversation_to_json(const Conversation& c) {
  json turns = json::array();
  for (const Turn& t : c.turns) {
    json jt = json::object();
    if (!t.user_tokens.empty())
      jt["user"] = t.user_tokens;
    else
      jt["user_text"] = t.user_text;
    jt["output_tokens"] = t.output_tokens;
    jt["think_time_s"] = t.think_time_s;
    turns.push_back(std::move(jt));
  }
  return json{{"id", c.id}, {"arrival_s", c.arrival_s}, {"turns", std::move(turns)}};
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

Status save_trace(const std::vector<Conversation>& conversations, const std::string& path) {
  std::unordered_map<std::string, size_t> seen;  // id -> index
  std::string text;
  for (size_t i = 0; i < conversations.size(); ++i) {
    const Conversation& c = conversations[i];
    if (Status s = validate_conversation(c); !s.ok())
      return make_error("trace {}: conversation {} ('{}'): {}", path, i, c.id, s.message());
    if (auto [it, inserted] = seen.emplace(c.id, i); !inserted)
      return make_error("trace {}: conversations {} and {} share the id '{}'", path, it->second, i,
                        c.id);
    try {
      text += conversation_to_json(c).dump();  // strict: invalid UTF-8 in text is an error
    } catch (const json::exception& e) {
      return make_error("trace {}: conversation {} ('{}'): {}", path, i, c.id, e.what());
    }
    text += '\n';
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("trace {}: cannot open for writing", path);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return make_error("trace {}: write failed", path);
  return Status::Ok();
}

Result<std::vector<Conversation>> parse_trace(std::string_view text, const std::string& name) {
  std::vector<Conversation> out;
  std::unordered_map<std::string, size_t> seen;  // id -> line number
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line(text.substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (is_blank(line)) continue;
    const json j = parse_json_or_discarded(line);
    if (j.is_discarded()) return make_error("{}:{}: not valid JSON", name, line_no);
    Result<Conversation> c = parse_conversation(j, line_no);
    if (!c.ok()) return make_error("{}:{}: {}", name, line_no, c.message());
    if (auto [it, inserted] = seen.emplace(c->id, line_no); !inserted)
      return make_error("{}:{}: id '{}' already used on line {}", name, line_no, c->id, it->second);
    out.push_back(std::move(c).value());
  }
  return out;
}

Result<std::vector<Conversation>> load_trace(const std::string& path) {
  TG_ASSIGN(const std::string text, read_file_text(path, "the trace"));
  return parse_trace(text, path);
}

}  // namespace tangram
