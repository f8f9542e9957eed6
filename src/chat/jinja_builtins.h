// Built-in filters, tests, value methods and global functions of the Jinja interpreter (the
// subset Hugging Face chat templates use, with Jinja2's semantics and argument conventions).
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace tangram::jinja {

// Binds call arguments to parameter names the Python way: positional ones in order, then
// keywords by name. Missing parameters are nullopt; extra or unknown ones are errors.
Result<std::vector<std::optional<Value>>> bind_args(const CallArgs& args, std::string_view function,
                                                    std::initializer_list<std::string_view> params);

using FilterFn = Result<Value> (*)(Interpreter&, const Value& input, const CallArgs& args);
using TestFn = Result<bool> (*)(Interpreter&, const Value& input, const CallArgs& args);
// nullptr when there is no such filter / test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// Methods on str and dict values. Mutating list/dict methods exist but are refused (kUnsafe),
// as in Jinja2's ImmutableSandboxedEnvironment.
enum class MethodKind { kNone, kSafe, kUnsafe };
MethodKind method_kind(const Value& obj, std::string_view name);
Result<Value> call_method(Interpreter& in, const Value& obj, std::string_view name,
                          const CallArgs& args);

// raise_exception, strftime_now, namespace, range, dict.
void add_global_functions(Dict& globals);

}  // namespace tangram::jinja
