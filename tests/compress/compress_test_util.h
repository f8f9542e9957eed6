// What the compress tests share: a small generated model and tangram profiles written from given
// per-head fractions.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "compress/profile.h"
#include "model/model.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram::testing {

// tiny-qwen3 cut to 2 layers of 4 KV heads (8 query heads), 1024 positions; loaded once.
inline Model& small_compress_model() {
  static std::unique_ptr<Model> m = [] {
    auto spec = synth_preset("tiny-qwen3");
    spec->n_layers = 2;
    spec->n_kv_head = 4;
    spec->n_head = 8;
    spec->ctx = 1024;
    const std::string path = (temp_dir() / "compress-model.gguf").string();
    EXPECT_TRUE(write_synth_model(*spec, path, 1).ok());
    auto r = Model::load(path);
    EXPECT_TRUE(r.ok()) << r.message();
    return std::move(r).value();
  }();
  return *m;
}

// A per-layer keydiff profile of an L x H model whose every statistic is `fractions` (one per
// (layer, head)), as if measured on `samples` identical samples; written to temp_dir()/name.
inline std::string write_test_profile(const std::vector<float>& fractions, int L, int H,
                                      const std::string& name, int samples = 1) {
  RetentionProfile p;
  p.scorer = "keydiff";
  p.model = "test";
  p.level = "per-layer";
  p.n_layers = L;
  p.n_kv_head = H;
  p.n_samples = samples;
  p.n_physical_layers = L;
  for (int l = 0; l < L; ++l) p.layer_ids.push_back(l);
  p.base_ratio = 0.3;
  p.sink = 4;
  p.window = 16;
  p.median = p.mean = p.p90 = fractions;
  p.std_dev.assign(fractions.size(), 0.0f);
  for (int s = 0; s < samples; ++s) {
    p.raw_ratio.insert(p.raw_ratio.end(), fractions.begin(), fractions.end());
    p.sample_meta.insert(p.sample_meta.end(), {996, 4, 1000, 16});
  }
  const std::string path = (temp_dir() / name).string();
  const Status st = save_profile(p, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

}  // namespace tangram::testing
