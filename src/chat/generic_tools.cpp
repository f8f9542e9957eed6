#include "chat/generic_tools.h"

namespace tangram {

std::string generic_tool_prompt(const nlohmann::json& tools) {
  std::string out =
      "You may call functions to answer. They are described in JSON Schema between <tools> and "
      "</tools>:\n<tools>\n";
  for (const nlohmann::json& t : tools)
    out += t.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  out +=
      "</tools>\nTo call one, write only this, once per call:\n<tool_call>\n{\"name\": "
      "\"FUNCTION NAME\", \"arguments\": {ARGUMENTS AS A JSON OBJECT}}\n</tool_call>\nEach "
      "result comes back between <tool_response> and </tool_response>.";
  return out;
}

namespace {

std::string call_text(const nlohmann::ordered_json& call) {
  const nlohmann::ordered_json& fn = call.contains("function") ? call["function"] : call;
  nlohmann::ordered_json body = {
      {"name", fn.value("name", std::string())},
      {"arguments", fn.value("arguments", nlohmann::ordered_json::object())}};
  std::string out = "<tool_call>\n";
  out.append(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  out.append("\n</tool_call>");
  return out;
}

}  // namespace

std::vector<ChatMessage> with_generic_tools(const std::vector<ChatMessage>& messages,
                                            const nlohmann::json& tools) {
  std::vector<ChatMessage> out;
  const std::string prompt = generic_tool_prompt(tools);
  bool prompted = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && !prompted) {
      ChatMessage s = m;
      if (!s.content.empty()) s.content.append("\n\n");
      s.content.append(prompt);
      out.push_back(std::move(s));
      prompted = true;
      continue;
    }
    if (m.role == "tool") {
      std::string result = "<tool_response>\n";
      result.append(m.content).append("\n</tool_response>");
      // Results of one round of calls go back as one user turn.
      if (!out.empty() && out.back().role == "user" &&
          out.back().content.rfind("<tool_response>", 0) == 0) {
        out.back().content.append("\n").append(result);
      } else {
        ChatMessage u;
        u.role = "user";
        u.content = result;
        out.push_back(std::move(u));
      }
      continue;
    }
    ChatMessage copy = m;
    if (m.role == "assistant" && m.tool_calls && !m.tool_calls->empty()) {
      for (const nlohmann::ordered_json& call : *m.tool_calls) {
        if (!copy.content.empty()) copy.content.push_back('\n');
        copy.content.append(call_text(call));
      }
      copy.tool_calls.reset();
    }
    out.push_back(std::move(copy));
  }
  if (!prompted) {
    ChatMessage s;
    s.role = "system";
    s.content = prompt;
    out.insert(out.begin(), std::move(s));
  }
  return out;
}

}  // namespace tangram
