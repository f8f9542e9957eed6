#include "chat/tool_call_stream.h"

#include "common/json_parse.h"

namespace tangram {
namespace {

constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr size_t kMaxMistralName = 256;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// One JSON value's text, fed a character at a time (the first not a space), copied out with the
// whitespace outside strings dropped.
class ValueText {
 public:
  enum class Step {
    More,        // c belongs to the value, which goes on
    Ended,       // c was the value's last character
    EndedBefore  // the value (a number, true, false, null) ended before c, which is not its own
  };
  Step feed(char c, std::string& out) {
    if (!started_) {
      started_ = true;
      string_ = c == '"';
      is_string_value_ = string_;
      scalar_ = !string_ && c != '{' && c != '[';
      if (c == '{' || c == '[') depth_ = 1;
      out += c;
      return Step::More;
    }
    if (scalar_) {
      if (c == ',' || c == '}' || c == ']' || is_space(c)) return Step::EndedBefore;
      out += c;
      return Step::More;
    }
    if (string_) {
      out += c;
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        string_ = false;
        if (depth_ == 0) return Step::Ended;
      }
      return Step::More;
    }
    if (is_space(c)) return Step::More;
    out += c;
    if (c == '"') {
      string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      return Step::Ended;
    }
    return Step::More;
  }
  bool is_string() const { return is_string_value_; }

 private:
  bool started_ = false;
  bool scalar_ = false;
  bool string_ = false;
  bool is_string_value_ = false;
  bool escape_ = false;
  int depth_ = 0;
};

struct Call {
  std::string name;  // "" until known
  std::string args;  // arguments text so far (streamable)
  bool args_complete = false;
  bool announced = false;
  size_t sent = 0;  // of args
};

// The members of one call object after its '{': "name" and the arguments ("arguments" or
// "parameters") are taken out, any other member skipped.
class CallObject {
 public:
  enum class Step { More, Done, Invalid };
  Step feed(char c, Call& call) {
    switch (phase_) {
      case Phase::BeforeKey:
        if (is_space(c) || c == ',') return Step::More;
        if (c == '}') return Step::Done;
        if (c != '"') return Step::Invalid;
        key_.clear();
        phase_ = Phase::Key;
        return Step::More;
      case Phase::Key:
        if (key_escape_) {
          key_escape_ = false;
        } else if (c == '\\') {
          key_escape_ = true;
        } else if (c == '"') {
          phase_ = Phase::Colon;
          return Step::More;
        }
        key_ += c;
        return Step::More;
      case Phase::Colon:
        if (is_space(c)) return Step::More;
        if (c != ':') return Step::Invalid;
        member_ = key_ == "name"                                ? Member::Name
                  : key_ == "arguments" || key_ == "parameters" ? Member::Args
                                                                : Member::Other;
        phase_ = Phase::ValueStart;
        return Step::More;
      case Phase::ValueStart:
        if (is_space(c)) return Step::More;
        value_ = ValueText();
        text_.clear();
        phase_ = Phase::Value;
        [[fallthrough]];
      case Phase::Value: {
        const ValueText::Step step = value_.feed(c, text_);
        if (member_ == Member::Args && !value_.is_string()) {
          call.args += text_;  // streamed as it comes
          text_.clear();
        }
        if (step == ValueText::Step::More) return Step::More;
        end_value(call);
        phase_ = Phase::AfterValue;
        if (step == ValueText::Step::Ended) return Step::More;
        return feed(c, call);  // c ends the number: read it as what follows the value
      }
      case Phase::AfterValue:
        if (is_space(c)) return Step::More;
        if (c == ',') {
          phase_ = Phase::BeforeKey;
          return Step::More;
        }
        return c == '}' ? Step::Done : Step::Invalid;
    }
    return Step::Invalid;
  }

 private:
  enum class Phase { BeforeKey, Key, Colon, ValueStart, Value, AfterValue };
  enum class Member { Name, Args, Other };
  void end_value(Call& call) {
    if (member_ == Member::Name) {
      auto j = parse_json(text_);
      if (j && j->is_string()) call.name = j->get<std::string>();
    } else if (member_ == Member::Args && !value_.is_string()) {
      call.args_complete = true;
    }
  }
  Phase phase_ = Phase::BeforeKey;
  Member member_ = Member::Other;
  std::string key_;
  bool key_escape_ = false;
  ValueText value_;
  std::string text_;  // the value's text not yet handed on
};

}  // namespace

struct ToolCallStreamer::State {
  enum class Phase {
    Seek,         // for `marker`
    Llama3Start,  // the reply's first characters: a call or content
    PythonTag,    // inside <|python_tag|>
    ExpectArray,  // Mistral JSON: '[' after the marker
    ExpectObject,
    InObject,
    AfterObject,
    MistralName,  // NAME before [ARGS]
    ExpectArgs,   // '{' after [ARGS]
    InArgs,
    Stopped  // not calls this streamer can follow: the end of the reply decides
  };
  ToolCallSyntax syntax;
  Phase phase = Phase::Stopped;
  std::string_view marker;
  std::string window;  // the last characters, to find the marker
  std::vector<Call> calls;
  CallObject object;
  ValueText args;

  void start_call() { calls.emplace_back(); }
  void after_call() {
    if (syntax == ToolCallSyntax::Hermes || syntax == ToolCallSyntax::MistralArgs) {
      phase = Phase::Seek;
      window.clear();
    } else {
      phase = Phase::AfterObject;
    }
  }
  bool window_ends_with(char c, std::string_view m) {
    window += c;
    if (window.size() > m.size()) window.erase(0, window.size() - m.size());
    return window == m;
  }

  void feed(char c) {
    switch (phase) {
      case Phase::Stopped:
        return;
      case Phase::Seek:
        if (!window_ends_with(c, marker)) return;
        window.clear();
        phase = syntax == ToolCallSyntax::MistralJson   ? Phase::ExpectArray
                : syntax == ToolCallSyntax::MistralArgs ? Phase::MistralName
                                                        : Phase::ExpectObject;
        return;
      case Phase::Llama3Start:
        if (is_space(c)) return;
        if (c == '{') return open_object();
        if (c != '<') {
          phase = Phase::Stopped;
          return;
        }
        phase = Phase::PythonTag;
        window.assign(1, c);
        return;
      case Phase::PythonTag:
        window += c;
        if (kPythonTag.substr(0, window.size()) != window)
          phase = Phase::Stopped;
        else if (window.size() == kPythonTag.size())
          phase = Phase::ExpectObject;
        return;
      case Phase::ExpectArray:
        if (is_space(c)) return;
        phase = c == '[' ? Phase::ExpectObject : Phase::Stopped;
        return;
      case Phase::ExpectObject:
        if (is_space(c)) return;
        if (c == '{') return open_object();
        phase = Phase::Stopped;
        return;
      case Phase::InObject:
        switch (object.feed(c, calls.back())) {
          case CallObject::Step::More:
            return;
          case CallObject::Step::Done:
            return after_call();
          case CallObject::Step::Invalid:
            phase = Phase::Stopped;
            return;
        }
        return;
      case Phase::AfterObject:
        if (is_space(c)) return;
        if (syntax == ToolCallSyntax::Llama3 && c == ';') {
          phase = Phase::ExpectObject;
        } else if (syntax == ToolCallSyntax::MistralJson && c == ',') {
          phase = Phase::ExpectObject;
        } else if (syntax == ToolCallSyntax::MistralJson && c == ']') {
          phase = Phase::Seek;
          window.clear();
        } else {
          phase = Phase::Stopped;
        }
        return;
      case Phase::MistralName: {
        window += c;
        if (window.size() > kMaxMistralName) {
          phase = Phase::Stopped;
          return;
        }
        if (!window.ends_with(kMistralArgs)) return;
        std::string name = window.substr(0, window.size() - kMistralArgs.size());
        while (!name.empty() && is_space(name.back())) name.pop_back();
        while (!name.empty() && is_space(name.front())) name.erase(0, 1);
        window.clear();
        if (name.empty()) {
          phase = Phase::Stopped;
          return;
        }
        start_call();
        calls.back().name = std::move(name);
        phase = Phase::ExpectArgs;
        return;
      }
      case Phase::ExpectArgs:
        if (is_space(c)) return;
        if (c != '{') {
          phase = Phase::Stopped;
          return;
        }
        args = ValueText();
        phase = Phase::InArgs;
        [[fallthrough]];
      case Phase::InArgs:
        if (args.feed(c, calls.back().args) == ValueText::Step::Ended) {
          calls.back().args_complete = true;
          after_call();
        }
        return;
    }
  }
  void open_object() {
    start_call();
    object = CallObject();
    phase = Phase::InObject;
  }
};

ToolCallStreamer::ToolCallStreamer(ToolCallSyntax syntax) : s_(std::make_unique<State>()) {
  s_->syntax = syntax;
  switch (syntax) {
    case ToolCallSyntax::Hermes:
      s_->phase = State::Phase::Seek;
      s_->marker = kToolCall;
      break;
    case ToolCallSyntax::Llama3:
      s_->phase = State::Phase::Llama3Start;
      break;
    case ToolCallSyntax::MistralJson:
    case ToolCallSyntax::MistralArgs:
      s_->phase = State::Phase::Seek;
      s_->marker = kMistralCalls;
      break;
    case ToolCallSyntax::QwenXml:  // typed only when whole: nothing streams
    case ToolCallSyntax::None:
      break;
  }
}

ToolCallStreamer::~ToolCallStreamer() = default;
ToolCallStreamer::ToolCallStreamer(ToolCallStreamer&&) noexcept = default;
ToolCallStreamer& ToolCallStreamer::operator=(ToolCallStreamer&&) noexcept = default;

std::vector<ToolCallDelta> ToolCallStreamer::append(std::string_view text) {
  std::vector<ToolCallDelta> out;
  if (s_->phase == State::Phase::Stopped) return out;
  for (char c : text) s_->feed(c);
  for (size_t i = 0; i < s_->calls.size(); ++i) {
    Call& call = s_->calls[i];
    // Announced in order, each once its name is whole (a call without one stops the line).
    if (call.name.empty()) break;
    if (call.announced && call.sent == call.args.size()) continue;
    ToolCallDelta d;
    d.index = static_cast<int>(i);
    d.opens = !call.announced;
    if (d.opens) d.name = call.name;
    d.arguments = call.args.substr(call.sent);
    call.sent = call.args.size();
    call.announced = true;
    out.push_back(std::move(d));
  }
  return out;
}

int ToolCallStreamer::calls() const {
  int n = 0;
  for (const Call& c : s_->calls) n += c.announced ? 1 : 0;
  return n;
}

const std::string& ToolCallStreamer::arguments(int i) const {
  return s_->calls[static_cast<size_t>(i)].args;
}

bool ToolCallStreamer::arguments_complete(int i) const {
  return s_->calls[static_cast<size_t>(i)].args_complete;
}

}  // namespace tangram
