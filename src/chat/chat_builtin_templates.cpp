// Built-in chat templates for models whose GGUF carries none, and prompt-family detection.
#include <array>

#include "chat/chat_template.h"

namespace tangram {

namespace {

// ChatML (Qwen, Hermes, many fine-tunes): <|im_start|>role\ncontent<|im_end|>\n per message.
constexpr std::string_view kChatML = R"({%- for message in messages %}
    {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %})";

// Llama 3 instruct: header-delimited turns closed by <|eot_id|>, contents trimmed.
constexpr std::string_view kLlama3 = R"({{- bos_token }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + message.content | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})";

// Llama 2 chat: [INST] turns, the system prompt wrapped in <<SYS>> inside the first one.
constexpr std::string_view kLlama2 = R"({%- if messages and messages[0].role == 'system' %}
    {%- set system_block = '<<SYS>>\n' + messages[0].content | trim + '\n<</SYS>>\n\n' %}
    {%- set turns = messages[1:] %}
{%- else %}
    {%- set system_block = '' %}
    {%- set turns = messages %}
{%- endif %}
{%- for message in turns %}
    {%- if message.role == 'user' %}
        {{- bos_token + '[INST] ' + (system_block if loop.first else '') + message.content | trim + ' [/INST]' }}
    {%- elif message.role == 'assistant' %}
        {{- ' ' + message.content | trim + ' ' + eos_token }}
    {%- else %}
        {{- raise_exception('llama2 template: unsupported role ' + message.role) }}
    {%- endif %}
{%- endfor %})";

struct Builtin {
  std::string_view name;
  std::string_view source;
};

constexpr std::array<Builtin, 3> kBuiltins = {
    {{"chatml", kChatML}, {"llama3", kLlama3}, {"llama2", kLlama2}}};

bool has(std::string_view source, std::string_view marker) {
  return source.find(marker) != std::string_view::npos;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::builtin(std::string_view name) {
  for (const Builtin& b : kBuiltins)
    if (b.name == name) return parse(std::string(b.source));
  return make_error("chat template: no built-in template named '{}' (have chatml, llama3, llama2)",
                    name);
}

std::string_view ChatTemplate::detect_family(std::string_view source) {
  if (has(source, "<|start_header_id|>")) return "llama3";
  if (has(source, "<|im_start|>")) return "chatml";
  if (has(source, "<start_of_turn>")) return "gemma";
  if (has(source, "<｜User｜>") || has(source, "<｜Assistant｜>")) return "deepseek";
  if (has(source, "<|user|>") && has(source, "<|end|>")) return "phi3";
  if (has(source, "[INST]")) return has(source, "<<SYS>>") ? "llama2" : "mistral";
  return "unknown";
}

}  // namespace tangram
