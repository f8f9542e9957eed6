// Renders the real Hugging Face chat templates in data/models/chat-templates/ for a set of
// conversations and compares every result with Python jinja2 configured as transformers
// configures it (tests/chat/render_reference.py). Where Python raises (e.g. a template that
// rejects a system message), the C++ side must return a clean Error too.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "chat/chat_template.h"
#include "chat/reference_renderer.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using testing::ReferenceCase;
using testing::ReferenceResult;

// Every template in the folder; the ones the project's model families use come first.
const std::vector<std::string>& template_names() {
  static const std::vector<std::string> names = {
      "Qwen-Qwen2.5-7B-Instruct",
      "Qwen-Qwen3-0.6B",
      "Qwen-QwQ-32B",
      "Qwen3-Coder",
      "Qwen3.5-4B",
      "meta-llama-Llama-3.1-8B-Instruct",
      "meta-llama-Llama-3.2-3B-Instruct",
      "meta-llama-Llama-3.3-70B-Instruct",
      "mistralai-Mistral-Nemo-Instruct-2407",
      "Mistral-Small-3.2-24B-Instruct-2506",
      "unsloth-mistral-Devstral-Small-2507",
      "mistralai-Ministral-3-14B-Reasoning-2512",
      "microsoft-Phi-3.5-mini-instruct",
      "google-gemma-2-2b-it",
      "google-gemma-4-31B-it",
      "google-gemma-4-31B-it-interleaved",
      "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
      "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
      "deepseek-ai-DeepSeek-V3.1",
      "deepseek-ai-DeepSeek-V3.2",
      "llama-cpp-deepseek-r1",
      "HuggingFaceTB-SmolLM3-3B",
      "ibm-granite-granite-3.3-2B-Instruct",
      "ibm-granite-granite-4.0",
      "ibm-granite-granite-4.1",
      "openai-gpt-oss-120b",
      "Apertus-8B-Instruct",
      "Apriel-1.6-15b-Thinker-fixed",
      "unsloth-Apriel-1.5",
      "Bielik-11B-v3.0-Instruct",
      "ByteDance-Seed-OSS",
      "CohereForAI-c4ai-command-r-plus-tool_use",
      "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
      "GLM-4.6",
      "GLM-4.7-Flash",
      "GigaChat3-10B-A1.8B",
      "GigaChat3.1-10B-A1.8B",
      "Kimi-K2-Instruct",
      "Kimi-K2-Thinking",
      "moonshotai-Kimi-K2",
      "LFM2-8B-A1B",
      "LFM2.5-8B-A1B",
      "LFM2.5-Instruct",
      "MiMo-VL",
      "MiniMax-M2",
      "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
      "NVIDIA-Nemotron-Nano-v2",
      "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
      "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
      "Reka-Edge",
      "StepFun3.5-Flash",
      "stepfun-ai-Step-3.5-Flash",
      "fireworks-ai-llama-3-firefunction-v2",
      "llama-cpp-rwkv-world",
      "meetkai-functionary-medium-v3.1",
      "meetkai-functionary-medium-v3.2",
      "upstage-Solar-Open-100B",
  };
  return names;
}

ChatMessage msg(std::string role, std::string content) {
  return ChatMessage{std::move(role), std::move(content), {}, {}, {}, {}};
}

struct Conversation {
  std::string name;
  std::vector<ChatMessage> messages;
  nlohmann::json extra;  // null or object
};

std::vector<Conversation> conversations() {
  const nlohmann::ordered_json weather_call = nlohmann::ordered_json::parse(R"([
    {"id": "call12345", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}])");
  const nlohmann::json tools = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "Get the current weather in a city",
      "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "description": "City name"},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}])");

  std::vector<Conversation> out;
  out.push_back(
      {"system_user",
       {msg("system", "You are a helpful assistant."), msg("user", "Hello! How are you?")},
       nullptr});
  out.push_back({"user_only", {msg("user", "What is 2+2?")}, nullptr});
  out.push_back({"multi_turn",
                 {msg("user", "Hi there"), msg("assistant", "Hello! How can I help you today?"),
                  msg("user", "Tell me a joke.")},
                 nullptr});
  out.push_back({"system_multi_turn",
                 {msg("system", "Answer briefly."), msg("user", "Capital of France?"),
                  msg("assistant", "Paris."), msg("user", "And of Italy?")},
                 nullptr});
  out.push_back(
      {"unicode",
       {msg("user", "Héllo wörld — 日本語のテキスト 🚀, Ελληνικά, русский"),
        msg("assistant", "Ответ: ✓ ñ ü ß"), msg("user", "¿Qué tal?\u00a0Ça va 👍🏽")},
       nullptr});
  out.push_back(
      {"braces_quotes",
       {msg("user",
            "Use {{ braces }}, {% tags %} and {# comments #} with \"double\" and 'single' "
            "quotes, a back\\slash, {\"json\": [1, 2]} and </s> <|im_end|>")},
       nullptr});
  out.push_back({"whitespace",
                 {msg("system", "  padded system  \n"), msg("user", "\n  indented question\n\n"),
                  msg("assistant", "  answer with spaces  "), msg("user", "next\tone ")},
                 nullptr});
  {
    ChatMessage think = msg("assistant", "<think>\nThe user greets me.\n</think>\n\nHello!");
    out.push_back({"thinking", {msg("user", "Hi"), think, msg("user", "How are you?")}, nullptr});
  }
  {
    ChatMessage call = msg("assistant", "");
    call.tool_calls = weather_call;
    ChatMessage result = msg("tool", "{\"temperature\": 21, \"condition\": \"sunny\"}");
    result.tool_call_id = "call12345";
    result.name = "get_weather";
    out.push_back({"tool_call",
                   {msg("system", "You can call tools."),
                    msg("user", "What's the weather in Paris?"), call, result},
                   {{"tools", tools}}});
  }
  out.push_back({"tools_available", {msg("user", "Weather in Rome?")}, {{"tools", tools}}});
  out.push_back(
      {"no_thinking", {msg("user", "Quick answer please.")}, {{"enable_thinking", false}}});
  out.push_back({"date_string",
                 {msg("system", "Be nice."), msg("user", "What day is it?")},
                 {{"date_string", "01 Jan 2025"}}});
  // Variables some templates require (firefunction-v2 reads `functions` and `datetime`).
  out.push_back({"functions_datetime",
                 {msg("user", "Find flights.")},
                 {{"functions", "[{\"name\": \"search_flights\"}]"}, {"datetime", "2024-07-26"}}});
  return out;
}

struct CaseKey {
  std::string conversation;
  bool add_generation_prompt;
};

struct TemplateRun {
  std::string source;
  std::vector<CaseKey> keys;
  std::vector<nlohmann::ordered_json> contexts;
  std::vector<ReferenceResult> expected;
};

std::string sanitized(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// The templates whose RealTemplate test this run will execute (all of them in a plain run, one
// when ctest runs a single test), so that one Python run serves them all.
std::set<std::string> selected_templates() {
  std::set<std::string> selected;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const auto* info = suite->GetTestInfo(j);
      if (!info->should_run()) continue;
      for (const std::string& name : template_names())
        if (std::string(info->name()) == "MatchesPythonJinja2/" + sanitized(name))
          selected.insert(name);
    }
  }
  return selected;
}

TemplateRun make_run(const std::string& name) {
  TemplateRun run;
  run.source = testing::read_file(testing::data_file("models/chat-templates/" + name + ".jinja"));
  for (const Conversation& c : conversations()) {
    for (bool gen : {true, false}) {
      auto ctx = ChatTemplate::make_context(c.messages, gen, "<|bos|>", "<|eos|>", c.extra);
      EXPECT_TRUE(ctx.ok()) << ctx.message();
      if (!ctx.ok()) continue;
      run.keys.push_back({c.name, gen});
      run.contexts.push_back(ctx.value());
    }
  }
  return run;
}

// Reference renderings for the selected templates, from one Python run made on first use.
const TemplateRun& reference_run(const std::string& name) {
  static std::map<std::string, TemplateRun> runs;
  if (runs.count(name) == 0) {
    std::set<std::string> wanted = selected_templates();
    wanted.insert(name);
    std::vector<ReferenceCase> cases;
    std::vector<std::string> batch;
    for (const std::string& n : wanted) {
      if (runs.count(n)) continue;
      runs[n] = make_run(n);
      batch.push_back(n);
      for (const auto& ctx : runs[n].contexts) cases.push_back({runs[n].source, ctx});
    }
    std::vector<ReferenceResult> results = testing::render_with_python(cases);
    size_t next = 0;
    for (const std::string& n : batch) {
      TemplateRun& run = runs[n];
      if (results.size() == cases.size()) {
        run.expected.assign(
            results.begin() + static_cast<std::ptrdiff_t>(next),
            results.begin() + static_cast<std::ptrdiff_t>(next + run.contexts.size()));
      }
      next += run.contexts.size();
    }
  }
  return runs[name];
}

class RealTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(RealTemplate, MatchesPythonJinja2) {
  const TemplateRun& run = reference_run(GetParam());
  ASSERT_EQ(run.expected.size(), run.contexts.size()) << "no reference renderings";

  auto tmpl = ChatTemplate::parse(run.source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  RenderOptions options;
  options.now_unix_seconds = testing::kReferenceNowUnix;
  int rendered = 0;
  int errors = 0;
  for (size_t i = 0; i < run.contexts.size(); ++i) {
    const std::string label =
        run.keys[i].conversation + (run.keys[i].add_generation_prompt ? " +gen" : " -gen");
    const ReferenceResult& want = run.expected[i];
    auto got = tmpl->render_context(run.contexts[i], options);
    if (want.ok) {
      ASSERT_TRUE(got.ok()) << label << ": Python rendered it but we failed: " << got.message();
      EXPECT_EQ(got.value(), want.text) << label;
      ++rendered;
    } else {
      ++errors;
      EXPECT_FALSE(got.ok()) << label << ": Python raised '" << want.error << "' but we rendered:\n"
                             << got.value();
      if (!got.ok()) {
        EXPECT_NE(got.message().find("line "), std::string::npos) << got.message();
      }
    }
  }
  // Every template renders at least the plain user-only conversation.
  EXPECT_GT(rendered, 0);
  fmt::print(
      "[ summary  ] {}: {} renderings identical to Python, {} clean errors where Python raises "
      "too\n",
      GetParam(), rendered, errors);
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  return sanitized(info.param);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, RealTemplate, ::testing::ValuesIn(template_names()),
                         test_name);

// The public render() builds the same context as make_context() and renders it.
TEST(ChatTemplateApi, RenderMatchesRenderContext) {
  auto tmpl = ChatTemplate::parse(
      testing::read_file(testing::data_file("models/chat-templates/Qwen-Qwen3-0.6B.jinja")));
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const std::vector<ChatMessage> messages = {msg("system", "S"), msg("user", "U")};
  const nlohmann::json extra = {{"enable_thinking", false}};
  auto direct = tmpl->render(messages, true, "", "<|im_end|>", extra);
  ASSERT_TRUE(direct.ok()) << direct.message();
  auto ctx = ChatTemplate::make_context(messages, true, "", "<|im_end|>", extra);
  ASSERT_TRUE(ctx.ok());
  auto via_context = tmpl->render_context(ctx.value());
  ASSERT_TRUE(via_context.ok());
  EXPECT_EQ(direct.value(), via_context.value());
  EXPECT_EQ(direct.value(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>"
            "assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateApi, ExtraMustBeAnObject) {
  auto tmpl = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(tmpl.ok());
  auto r = tmpl->render({msg("user", "x")}, true, "", "", nlohmann::json::array());
  EXPECT_FALSE(r.ok());
}

TEST(ChatTemplateApi, DetectFamily) {
  auto family_of = [](const std::string& name) {
    return std::string(ChatTemplate::detect_family(
        testing::read_file(testing::data_file("models/chat-templates/" + name + ".jinja"))));
  };
  EXPECT_EQ(family_of("meta-llama-Llama-3.1-8B-Instruct"), "llama3");
  EXPECT_EQ(family_of("Qwen-Qwen2.5-7B-Instruct"), "chatml");
  EXPECT_EQ(family_of("google-gemma-2-2b-it"), "gemma");
  EXPECT_EQ(family_of("microsoft-Phi-3.5-mini-instruct"), "phi3");
  EXPECT_EQ(family_of("mistralai-Mistral-Nemo-Instruct-2407"), "mistral");
  EXPECT_EQ(family_of("deepseek-ai-DeepSeek-R1-Distill-Llama-8B"), "deepseek");
  EXPECT_EQ(ChatTemplate::detect_family("[INST] <<SYS>>"), "llama2");
  EXPECT_EQ(ChatTemplate::detect_family("{{ messages }}"), "unknown");
}

// The built-in fallbacks render as Python renders the same source.
TEST(ChatTemplateApi, BuiltinsMatchPythonJinja2) {
  std::vector<ReferenceCase> cases;
  std::vector<std::pair<ChatTemplate, nlohmann::ordered_json>> ours;
  for (const char* name : {"chatml", "llama3", "llama2"}) {
    auto tmpl = ChatTemplate::builtin(name);
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.message();
    for (const Conversation& c : conversations()) {
      for (bool gen : {true, false}) {
        auto ctx = ChatTemplate::make_context(c.messages, gen, "<s>", "</s>", nullptr);
        ASSERT_TRUE(ctx.ok());
        cases.push_back({tmpl->source(), ctx.value()});
        ours.emplace_back(tmpl.value(), ctx.value());
      }
    }
  }
  const auto want = testing::render_with_python(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    auto got = ours[i].first.render_context(ours[i].second);
    if (want[i].ok) {
      ASSERT_TRUE(got.ok()) << got.message();
      EXPECT_EQ(got.value(), want[i].text);
    } else {
      EXPECT_FALSE(got.ok()) << want[i].error;
    }
  }
  EXPECT_FALSE(ChatTemplate::builtin("vicuna").ok());
}

}  // namespace
}  // namespace tangram
