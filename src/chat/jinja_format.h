// Python's printf-style string formatting (`'%s: %d' % (name, n)`), the subset of conversion
// types and flags that appears in templates: s r a d i u f F e E g G x X o c and %%.
#pragma once

#include <string>

#include "chat/jinja_value.h"

namespace tangram::jinja {

// format % args, with Python's rules for a tuple, a mapping (for %(key)s) or a single value.
Result<Value> py_percent_format(const std::string& format, const Value& args);

}  // namespace tangram::jinja
