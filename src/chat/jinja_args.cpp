// Python-style binding of call arguments to the parameters of built-in functions.
#include "chat/jinja_builtins.h"

namespace tangram::jinja {

Result<std::vector<std::optional<Value>>> bind_args(
    const CallArgs& args, std::string_view function,
    std::initializer_list<std::string_view> params) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size())
    return make_error("{}() takes at most {} argument(s) ({} given)", function, params.size(),
                      args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t k = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++k;
    }
    if (k == params.size())
      return make_error("{}() got an unexpected keyword argument '{}'", function, key);
    if (bound[k]) return make_error("{}() got multiple values for argument '{}'", function, key);
    bound[k] = value;
  }
  return bound;
}

}  // namespace tangram::jinja
