// The shipped profiles and cluster maps under data/profiles, listed from its index.json.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram::testing {

struct ShippedFile {
  std::string path;  // absolute
  std::string kind;  // profile | cluster_map
  std::string scorer, model, name;
  nlohmann::json entry;  // the index entry
};

inline std::string string_or_empty(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>() : std::string();
}

// Every file index.json lists; fails the calling test when the index is missing or empty.
inline std::vector<ShippedFile> shipped_profile_files() {
  const auto index_path = data_file("profiles/index.json");
  const nlohmann::json index = nlohmann::json::parse(read_file(index_path), nullptr, false);
  std::vector<ShippedFile> out;
  if (index.is_discarded() || !index.contains("files") || !index["files"].is_array()) {
    ADD_FAILURE() << "cannot read the file list of " << index_path;
    return out;
  }
  for (const auto& f : index["files"]) {
    ShippedFile s;
    s.path = (data_dir() / "profiles" / string_or_empty(f, "file")).string();
    s.kind = string_or_empty(f, "kind");
    s.scorer = string_or_empty(f, "scorer");
    s.model = string_or_empty(f, "model");
    s.name = string_or_empty(f, "name");
    s.entry = f;
    out.push_back(std::move(s));
  }
  EXPECT_EQ(out.size(), 67u) << "index.json should list 34 profiles and 33 cluster maps";
  return out;
}

inline std::string profile_path(const std::string& scorer, const std::string& model,
                                bool per_layer) {
  return data_file("profiles/" + scorer + "/" + model +
                   (per_layer ? "/profile_perlayer.json" : "/profile.json"))
      .string();
}

}  // namespace tangram::testing
