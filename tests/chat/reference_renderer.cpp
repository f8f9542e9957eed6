#include "chat/reference_renderer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "support/test_support.h"

namespace tangram::testing {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

bool can_import_jinja2(const std::string& python) {
  const std::string cmd = python + " -c 'import jinja2' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

std::string find_python_with_jinja2(std::string* why) {
  for (const std::string candidate : {"python3", "/usr/bin/python3"}) {
    if (can_import_jinja2(candidate)) return candidate;
  }
  *why =
      "neither `python3` on PATH nor /usr/bin/python3 can import jinja2; install it "
      "(apt-get install python3-jinja2, or pip install jinja2) to generate the reference "
      "renderings";
  return "";
}

std::vector<ReferenceResult> render_with_python(const std::vector<ReferenceCase>& cases) {
  std::string why;
  const std::string python = find_python_with_jinja2(&why);
  if (python.empty()) {
    ADD_FAILURE() << why;
    return {};
  }
  const std::filesystem::path dir = temp_dir();
  const std::filesystem::path input = dir / "reference_in.json";
  const std::filesystem::path output = dir / "reference_out.json";
  const std::filesystem::path errors = dir / "reference_err.txt";
  nlohmann::ordered_json request;
  request["now"] = kReferenceNowFields;
  request["cases"] = nlohmann::ordered_json::array();
  for (const ReferenceCase& c : cases)
    request["cases"].push_back({{"template", c.template_source}, {"context", c.context}});
  {
    std::ofstream out(input, std::ios::binary);
    out << request.dump();
  }
  const std::string script = std::string(TANGRAM_SOURCE_DIR) + "/tests/chat/render_reference.py";
  const std::string cmd = python + " " + shell_quote(script) + " " + shell_quote(input.string()) +
                          " " + shell_quote(output.string()) + " 2>" + shell_quote(errors.string());
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "render_reference.py failed (" << cmd << "):\n" << read_file(errors);
    return {};
  }
  const auto parsed = nlohmann::json::parse(read_file(output), nullptr, false);
  if (!parsed.is_array() || parsed.size() != cases.size()) {
    ADD_FAILURE() << "render_reference.py wrote an unexpected result file " << output;
    return {};
  }
  std::vector<ReferenceResult> results;
  for (const auto& r : parsed) {
    ReferenceResult res;
    res.ok = r.value("ok", false);
    res.text = r.value("text", "");
    res.error = r.value("error", "");
    results.push_back(std::move(res));
  }
  std::filesystem::remove_all(dir);
  return results;
}

}  // namespace tangram::testing
