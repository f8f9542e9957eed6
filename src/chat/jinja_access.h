// Attribute access, subscripts and slices with Jinja2's sandboxed semantics: `a.b` tries the
// attribute (methods) before the item, `a['b']` the item before the attribute, misses give
// undefined, and methods that would mutate a list or dict are refused as unsafe.
#pragma once

#include <string_view>

#include "chat/jinja_value.h"

namespace tangram::jinja {

Result<Value> get_attr(const Value& obj, std::string_view name);
Result<Value> get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be none/undefined (omitted).
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Jinja's attribute path as used by map/selectattr/sort/join: "a.b.0" looks up each part,
// integer parts as indices.
Result<Value> get_attribute_path(const Value& obj, std::string_view path);

}  // namespace tangram::jinja
