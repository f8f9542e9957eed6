// The automatic profile through the library, as a program using Engine would get it (no CLI):
// on the real stories260K model, the first call measures a profile from the shipped calibration
// text and caches it, the second reuses the same file, and other settings get another file.
#include "profiling/auto_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "compress/profile.h"
#include "support/test_support.h"

namespace tangram {
namespace {

namespace fs = std::filesystem;

TEST(AutoProfileLibrary, MeasuresOnceThenReusesAndKeysBySettings) {
  auto model = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto calibration = calibration_files({testing::data_dir() / "calibration"});
  ASSERT_TRUE(calibration.ok()) << calibration.message();
  EXPECT_EQ(calibration->size(), 5u) << "one file per kind of text";

  const fs::path cache = fs::path(::testing::TempDir()) / "tangram-auto-profile-library";
  fs::remove_all(cache);
  AutoProfileRequest request;
  request.calibration = *calibration;
  request.cache_dir = cache;
  request.settings = auto_profile_settings(**model, "keydiff", "per-layer", 4, 32, 1, "stories");
  EXPECT_EQ(request.settings.n_samples, 50);
  EXPECT_LE(request.settings.sample_tokens, (*model)->config().context_length - 8);

  auto made = automatic_profile(request, **model, **tok);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(made->origin, "made");
  ASSERT_TRUE(fs::exists(made->path));
  EXPECT_EQ(fs::path(made->path).parent_path().parent_path(), cache);
  auto profile = load_profile(made->path);
  ASSERT_TRUE(profile.ok()) << profile.message();
  EXPECT_EQ(profile->n_layers, (*model)->config().n_layers);
  EXPECT_EQ(profile->n_kv_head, (*model)->config().n_kv_head);
  EXPECT_EQ(profile->scorer, "keydiff");

  auto reused = automatic_profile(request, **model, **tok);
  ASSERT_TRUE(reused.ok()) << reused.message();
  EXPECT_EQ(reused->origin, "reused");
  EXPECT_EQ(reused->path, made->path);

  request.settings.window = 16;  // other settings: another file
  auto other = automatic_profile(request, **model, **tok);
  ASSERT_TRUE(other.ok()) << other.message();
  EXPECT_EQ(other->origin, "made");
  EXPECT_NE(other->path, made->path);

  request.calibration.clear();
  EXPECT_FALSE(automatic_profile(request, **model, **tok).ok()) << "no calibration text";
  EXPECT_FALSE(calibration_files({cache / "none"}).ok());
  fs::remove_all(cache);
}

}  // namespace
}  // namespace tangram
