#include "chat/tool_calls.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace tangram {
namespace {

using nlohmann::json;

constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kToolCallEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

// The end (one past the closing brace or bracket) of the JSON object or array starting at
// `pos`, honouring strings and escapes; npos when it does not close.
size_t json_value_end(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if ((c == '}' || c == ']') && --depth == 0)
      return i + 1;
  }
  return std::string_view::npos;
}

std::optional<json> json_or_nothing(std::string_view s) {
  // The model's output is bounded like any input (a model can write 10,000 '[').
  auto j = parse_json(s);
  if (!j) return std::nullopt;
  return std::move(j).value();
}

// {"name": "...", "<args_key>": {...} or a JSON string of one} as a call.
std::optional<ParsedToolCall> call_from_object(const json& j, const char* args_key,
                                               const char* alt_key) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return std::nullopt;
  auto args = j.find(args_key);
  if (args == j.end() && alt_key != nullptr) args = j.find(alt_key);
  ParsedToolCall call;
  call.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump();
  } else if (args->is_string()) {
    std::optional<json> inner = json_or_nothing(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = inner->dump();
  } else {
    return std::nullopt;
  }
  if (auto id = j.find("id"); id != j.end() && id->is_string()) call.id = id->get<std::string>();
  return call;
}

// A Qwen3-Coder call body: <function=NAME><parameter=P>VALUE</parameter>...</function>.
std::optional<ParsedToolCall> qwen_xml_call(std::string_view body) {
  body = trim(body);
  constexpr std::string_view open = "<function=";
  if (body.substr(0, open.size()) != open) return std::nullopt;
  const size_t name_end = body.find('>');
  if (name_end == std::string_view::npos) return std::nullopt;
  ParsedToolCall call;
  call.name = std::string(trim(body.substr(open.size(), name_end - open.size())));
  if (call.name.empty()) return std::nullopt;
  json args = json::object();
  std::string_view rest = body.substr(name_end + 1);
  constexpr std::string_view param = "<parameter=", param_end = "</parameter>";
  for (size_t p = rest.find(param); p != std::string_view::npos; p = rest.find(param)) {
    const size_t key_end = rest.find('>', p);
    const size_t value_end =
        key_end == std::string_view::npos ? key_end : rest.find(param_end, key_end);
    if (value_end == std::string_view::npos) return std::nullopt;
    const std::string key(trim(rest.substr(p + param.size(), key_end - p - param.size())));
    const std::string_view value = trim(rest.substr(key_end + 1, value_end - key_end - 1));
    std::optional<json> typed =
        json_or_nothing(value);  // numbers, booleans, objects keep their type
    args[key] = typed && !typed->is_string() ? *typed : json(std::string(value));
    rest = rest.substr(value_end + param_end.size());
  }
  call.arguments = args.dump();
  return call;
}

// <tool_call>...</tool_call> blocks (the last may lack its end: the model stopped after it).
ParsedReply parse_tagged(std::string_view reply, bool xml) {
  ParsedReply out;
  std::string content;
  size_t pos = 0;
  for (size_t start = reply.find(kToolCall); start != std::string_view::npos;
       start = reply.find(kToolCall, pos)) {
    content += reply.substr(pos, start - pos);
    const size_t body = start + kToolCall.size();
    size_t end = reply.find(kToolCallEnd, body);
    const std::string_view inner =
        reply.substr(body, end == std::string_view::npos ? end : end - body);
    std::optional<ParsedToolCall> call;
    if (xml) {
      call = qwen_xml_call(inner);
    } else if (std::optional<json> j = json_or_nothing(trim(inner))) {
      call = call_from_object(*j, "arguments", "parameters");
    }
    if (!call) return ParsedReply{std::string(trim(reply)), {}};
    out.calls.push_back(std::move(*call));
    pos = end == std::string_view::npos ? reply.size() : end + kToolCallEnd.size();
  }
  content += reply.substr(std::min(pos, reply.size()));
  out.content = std::string(trim(content));
  return out;
}

// Llama 3.x: the whole reply is one call or several separated by ';'.
ParsedReply parse_llama3(std::string_view reply) {
  std::string_view s = trim(reply);
  if (s.substr(0, kPythonTag.size()) == kPythonTag) s = trim(s.substr(kPythonTag.size()));
  ParsedReply out;
  while (!s.empty()) {
    const size_t end = s.front() == '{' ? json_value_end(s, 0) : std::string_view::npos;
    std::optional<json> j =
        end == std::string_view::npos ? std::nullopt : json_or_nothing(s.substr(0, end));
    std::optional<ParsedToolCall> call =
        j ? call_from_object(*j, "parameters", "arguments") : std::nullopt;
    if (!call) return ParsedReply{std::string(trim(reply)), {}};
    out.calls.push_back(std::move(*call));
    s = trim(s.substr(end));
    if (!s.empty() && s.front() == ';') s = trim(s.substr(1));
  }
  return out;
}

// Mistral: content, then [TOOL_CALLS] and a JSON array of calls, or NAME[ARGS]{...} per marker.
ParsedReply parse_mistral(std::string_view reply, bool args_syntax) {
  const size_t first = reply.find(kMistralCalls);
  if (first == std::string_view::npos) return ParsedReply{std::string(trim(reply)), {}};
  ParsedReply out;
  out.content = std::string(trim(reply.substr(0, first)));
  std::string_view rest = reply.substr(first);
  const ParsedReply as_content{std::string(trim(reply)), {}};
  while (!(rest = trim(rest)).empty()) {
    if (rest.substr(0, kMistralCalls.size()) != kMistralCalls) return as_content;
    rest = trim(rest.substr(kMistralCalls.size()));
    if (args_syntax) {
      const size_t args = rest.find(kMistralArgs);
      if (args == std::string_view::npos) return as_content;
      ParsedToolCall call;
      call.name = std::string(trim(rest.substr(0, args)));
      rest = trim(rest.substr(args + kMistralArgs.size()));
      const size_t end =
          !rest.empty() && rest.front() == '{' ? json_value_end(rest, 0) : std::string_view::npos;
      std::optional<json> j =
          end == std::string_view::npos ? std::nullopt : json_or_nothing(rest.substr(0, end));
      if (call.name.empty() || !j || !j->is_object()) return as_content;
      call.arguments = j->dump();
      out.calls.push_back(std::move(call));
      rest = rest.substr(end);
    } else {
      const size_t end =
          !rest.empty() && rest.front() == '[' ? json_value_end(rest, 0) : std::string_view::npos;
      std::optional<json> j =
          end == std::string_view::npos ? std::nullopt : json_or_nothing(rest.substr(0, end));
      if (!j || !j->is_array() || j->empty()) return as_content;
      for (const json& item : *j) {
        std::optional<ParsedToolCall> call = call_from_object(item, "arguments", "parameters");
        if (!call) return as_content;
        out.calls.push_back(std::move(*call));
      }
      rest = rest.substr(end);
    }
  }
  return out;
}

// The text that begins a call in a syntax that marks calls ("" for Llama 3 and None).
std::string_view call_marker(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::Hermes:
    case ToolCallSyntax::QwenXml:
      return kToolCall;
    case ToolCallSyntax::MistralJson:
    case ToolCallSyntax::MistralArgs:
      return kMistralCalls;
    case ToolCallSyntax::Llama3:
    case ToolCallSyntax::None:
      break;
  }
  return {};
}

// The offset of `marker` in text, or of a proper prefix of it that ends the text.
std::optional<size_t> marker_or_prefix(std::string_view text, std::string_view marker) {
  if (size_t p = text.find(marker); p != std::string_view::npos) return p;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  return std::nullopt;
}

}  // namespace

std::string_view tool_call_syntax_name(ToolCallSyntax s) {
  switch (s) {
    case ToolCallSyntax::None:
      return "none";
    case ToolCallSyntax::Hermes:
      return "hermes";
    case ToolCallSyntax::QwenXml:
      return "qwen-xml";
    case ToolCallSyntax::Llama3:
      return "llama3";
    case ToolCallSyntax::MistralJson:
      return "mistral";
    case ToolCallSyntax::MistralArgs:
      return "mistral-args";
  }
  return "none";
}

ToolCallSyntax detect_tool_call_syntax(std::string_view src) {
  if (contains(src, kMistralCalls))
    return contains(src, kMistralArgs) ? ToolCallSyntax::MistralArgs : ToolCallSyntax::MistralJson;
  if (contains(src, kToolCall))
    return contains(src, "<function=") ? ToolCallSyntax::QwenXml : ToolCallSyntax::Hermes;
  if (contains(src, "<|start_header_id|>") &&
      (contains(src, kPythonTag) || contains(src, "\"parameters\"")))
    return ToolCallSyntax::Llama3;
  return ToolCallSyntax::None;
}

ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply) {
  switch (syntax) {
    case ToolCallSyntax::Hermes:
      return parse_tagged(reply, /*xml=*/false);
    case ToolCallSyntax::QwenXml:
      return parse_tagged(reply, /*xml=*/true);
    case ToolCallSyntax::Llama3:
      return parse_llama3(reply);
    case ToolCallSyntax::MistralJson:
      return parse_mistral(reply, /*args_syntax=*/false);
    case ToolCallSyntax::MistralArgs:
      return parse_mistral(reply, /*args_syntax=*/true);
    case ToolCallSyntax::None:
      break;
  }
  return ParsedReply{std::string(reply), {}};
}

std::optional<size_t> tool_call_start(ToolCallSyntax syntax, std::string_view text) {
  switch (syntax) {
    case ToolCallSyntax::Hermes:
    case ToolCallSyntax::QwenXml:
    case ToolCallSyntax::MistralJson:
    case ToolCallSyntax::MistralArgs:
      return marker_or_prefix(text, call_marker(syntax));
    case ToolCallSyntax::Llama3: {
      // Only a reply that begins as a call is one: a '{' later on is content. Leading
      // whitespace may still be followed by a call.
      const size_t first = text.find_first_not_of(" \n\t\r");
      if (first == std::string_view::npos)
        return text.empty() ? std::nullopt : std::optional<size_t>(0);
      const std::string_view body = text.substr(first);
      const size_t n = std::min(kPythonTag.size(), body.size());
      if (body.front() == '{' || body.substr(0, n) == kPythonTag.substr(0, n)) return 0;
      return std::nullopt;
    }
    case ToolCallSyntax::None:
      break;
  }
  return std::nullopt;
}

std::optional<size_t> ToolCallStartScanner::append(std::string_view delta) {
  if (decided_) {
    size_ += delta.size();
    return decided_at_;
  }
  if (syntax_ == ToolCallSyntax::Llama3) return append_llama3(delta);
  const std::string_view marker = call_marker(syntax_);
  if (marker.empty()) {  // no tools: all of it is content
    size_ += delta.size();
    decided_ = true;
    return std::nullopt;
  }
  return append_marked(delta, marker);
}

std::optional<size_t> ToolCallStartScanner::append_marked(std::string_view delta,
                                                          std::string_view marker) {
  // The first marker in the reply, if the text before this delta held none, begins at most
  // (marker length - 1) bytes before it, so it lies in tail + delta; so does any prefix of the
  // marker that ends the reply.
  std::string window = std::move(tail_);
  window.append(delta);
  const size_t base = size_ + delta.size() - window.size();  // the window's offset in the reply
  size_ += delta.size();
  std::optional<size_t> at = marker_or_prefix(window, marker);
  if (at && window.compare(*at, marker.size(), marker) == 0) {
    decided_ = true;  // a whole marker: the first stays the first
    decided_at_ = base + *at;
    return decided_at_;
  }
  tail_ = window.substr(window.size() - std::min(window.size(), marker.size() - 1));
  return at ? std::optional<size_t>(base + *at) : std::nullopt;
}

std::optional<size_t> ToolCallStartScanner::append_llama3(std::string_view delta) {
  // The answer rests on the first bytes after the leading whitespace: a '{' or a prefix of
  // <|python_tag|> begins a call, anything else is content; whitespace alone is held back.
  size_ += delta.size();
  for (char c : delta) {
    if (head_.empty() && is_space(c)) continue;
    head_.push_back(c);
    const bool tag_so_far = kPythonTag.substr(0, head_.size()) == head_;
    if (head_.front() == '{' || !tag_so_far || head_.size() == kPythonTag.size()) {
      decided_ = true;
      decided_at_ = head_.front() == '{' || tag_so_far ? std::optional<size_t>(0) : std::nullopt;
      return decided_at_;
    }
  }
  if (size_ == 0) return std::nullopt;
  return 0;  // whitespace, or a beginning of <|python_tag|>
}

}  // namespace tangram
