#include "chat/chat_template.h"

#include "chat/jinja_interpreter.h"
#include "chat/jinja_json.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace tangram {

struct ChatTemplate::Program {
  std::string source;
  jinja::Body body;
};

nlohmann::ordered_json chat_message_to_json(const ChatMessage& message) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  m["role"] = message.role;
  m["content"] = message.content;
  if (message.tool_calls) m["tool_calls"] = *message.tool_calls;
  if (message.reasoning_content) m["reasoning_content"] = *message.reasoning_content;
  if (message.tool_call_id) m["tool_call_id"] = *message.tool_call_id;
  if (message.name) m["name"] = *message.name;
  return m;
}

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  // Hugging Face compiles chat templates with trim_blocks and lstrip_blocks.
  jinja::LexerOptions lexer_options;
  lexer_options.trim_blocks = true;
  lexer_options.lstrip_blocks = true;
  auto tokens = jinja::tokenize(source, lexer_options);
  if (!tokens.ok()) return make_error("chat template: {}", tokens.message());
  auto body = jinja::parse_template(tokens.value());
  if (!body.ok()) return make_error("chat template: {}", body.message());
  auto program = std::make_shared<Program>();
  program->source = std::move(source);
  program->body = std::move(body.value());
  return ChatTemplate(std::move(program));
}

const std::string& ChatTemplate::source() const { return program_->source; }

Result<nlohmann::ordered_json> ChatTemplate::make_context(const std::vector<ChatMessage>& messages,
                                                          bool add_generation_prompt,
                                                          const std::string& bos_token,
                                                          const std::string& eos_token,
                                                          const nlohmann::json& extra) {
  if (!extra.is_null() && !extra.is_object())
    return make_error("chat template: extra variables must be a JSON object, got {}", extra.type_name());
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  auto list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back(chat_message_to_json(m));
  context["messages"] = std::move(list);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  if (extra.is_object())
    for (const auto& [key, value] : extra.items()) context[key] = nlohmann::ordered_json(value);
  return context;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         const std::string& bos_token, const std::string& eos_token,
                                         const nlohmann::json& extra) const {
  TG_ASSIGN(auto context, make_context(messages, add_generation_prompt, bos_token, eos_token, extra));
  return render_context(context);
}

Result<std::string> ChatTemplate::render_context(const nlohmann::ordered_json& context,
                                                 const RenderOptions& options) const {
  if (!context.is_object()) return make_error("chat template: the render context must be a JSON object");
  auto vars = jinja::value_from_json(context);
  if (!vars.ok()) return make_error("chat template: context: {}", vars.message());
  jinja::RenderLimits limits;
  limits.max_steps = options.max_steps;
  limits.max_output_bytes = options.max_output_bytes;
  limits.max_call_depth = options.max_call_depth;
  jinja::Interpreter interpreter(limits, options.now_unix_seconds);
  auto text = interpreter.render(program_->body, vars.value().as_dict());
  if (!text.ok()) return make_error("chat template: {}", text.message());
  return std::move(text.value());
}

}  // namespace tangram
