// A recall set small enough for stories260K's context (its 512-token vocabulary makes the shipped
// set's conversations too long): two conversations of one question each, written to a file.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram::testing {

inline std::string small_recall_set() {
  std::string filler;
  for (int i = 0; i < 10; ++i) filler += "Lily and Max played with the red ball in the park. ";
  std::string out;
  for (const char* kind : {"single", "update"}) {
    nlohmann::json conv{{"seed", 1099511627777}, {"kind", kind}};
    conv["messages"] = {{{"role", "user"}, {"content", filler}, {"kind", "prose"}},
                        {{"role", "assistant"}, {"content", "OK."}, {"kind", "ack"}},
                        {{"role", "user"}, {"content", "What is the code?"}, {"kind", "question"}},
                        {{"role", "assistant"}, {"content", "4821"}, {"kind", "answer"}}};
    out += conv.dump() + "\n";
  }
  return out;
}

// Writes `text` to a file of the test's temporary folder; returns its path.
inline std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = (temp_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace tangram::testing
