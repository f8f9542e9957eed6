// Runs tests/chat/render_reference.py (Python jinja2 configured as Hugging Face transformers
// configures it) to produce the expected renderings the C++ interpreter is compared against.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tangram::testing {

struct ReferenceCase {
  std::string template_source;
  nlohmann::ordered_json context;
};

struct ReferenceResult {
  bool ok = false;
  std::string text;   // when ok
  std::string error;  // Python's exception, when not ok
};

// The fixed clock both sides use for strftime_now: 2024-07-26 12:00:00 (UTC).
constexpr int64_t kReferenceNowUnix = 1721995200;
constexpr std::array<int, 6> kReferenceNowFields = {2024, 7, 26, 12, 0, 0};

// A Python interpreter that can import jinja2: `python3` on PATH, then /usr/bin/python3.
// Empty (and *why set) when there is none.
std::string find_python_with_jinja2(std::string* why);

// Renders every case in one Python run. On setup failure (no interpreter, script error) it
// records a gtest failure with a clear message and returns an empty vector.
std::vector<ReferenceResult> render_with_python(const std::vector<ReferenceCase>& cases);

}  // namespace tangram::testing
