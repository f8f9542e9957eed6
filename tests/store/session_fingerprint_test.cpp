// Session fingerprints: equal inputs give equal fingerprints (across separately written files);
// a model differing in metadata, a tensor's shape or type, or sampled weight bytes gets another;
// maps differing in grouping or column order get another; mismatches are named in order.
#include "store/session_fingerprint.h"

#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "support/test_support.h"

namespace tangram {
namespace {

struct ModelVariant {
  const char* name = "m";
  int64_t rows = 4;
  float first = 0.5f;   // a sampled byte range (the tensor's start)
  float middle = 0.0f;  // a byte outside every sample of a 4096-value tensor
};

uint64_t fingerprint_of_model(const ModelVariant& v, const std::filesystem::path& path) {
  GgufWriter w;
  w.set_string("general.name", v.name);
  w.set_u32("test.block_count", 2);
  std::vector<float> small(static_cast<size_t>(8 * v.rows), 1.0f);  // [rows][8]
  small[0] = v.first;
  EXPECT_TRUE(
      w.add_tensor("small.weight", GgmlType::F32, {8, v.rows}, small.data(), small.size() * 4)
          .ok());
  std::vector<float> big(4096,
                         2.0f);  // [64][64]: samples cover bytes [0,64), the middle 64, the last 64
  big[1000] = v.middle;
  EXPECT_TRUE(w.add_tensor("big.weight", GgmlType::F32, {64, 64}, big.data(), big.size() * 4).ok());
  EXPECT_TRUE(w.write(path.string()).ok());
  auto g = GgufFile::open(path.string());
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? model_fingerprint(**g) : 0;
}

TEST(SessionFingerprint, ModelFingerprintFollowsMetadataShapesAndSampledWeights) {
  const std::filesystem::path dir = testing::temp_dir();
  const uint64_t base = fingerprint_of_model({}, dir / "base.gguf");
  EXPECT_NE(base, 0u);
  EXPECT_EQ(fingerprint_of_model({}, dir / "copy.gguf"), base);
  ModelVariant renamed, more_rows, other_weight, unsampled;
  renamed.name = "m2";
  more_rows.rows = 5;
  other_weight.first = 0.25f;
  unsampled.middle = 3.0f;
  EXPECT_NE(fingerprint_of_model(renamed, dir / "name.gguf"), base);
  EXPECT_NE(fingerprint_of_model(more_rows, dir / "rows.gguf"), base);
  EXPECT_NE(fingerprint_of_model(other_weight, dir / "weight.gguf"), base);
  // A byte outside the samples: the cheap fingerprint does not see it (documented limit).
  EXPECT_EQ(fingerprint_of_model(unsampled, dir / "unsampled.gguf"), base);
}

// The loader interleaves Q8_0 matmul weights in a huge-page copy (Model::load); the fingerprint
// samples the file's bytes, not the rewritten ones, so a session saved either way restores
// either way.
TEST(SessionFingerprint, ModelFingerprintIgnoresTheWeightsLayout) {
  const int64_t cols = 256, rows = 40;  // two interleaved groups and a row-major tail of 8
  std::vector<float> values(static_cast<size_t>(cols * rows));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
  const size_t rb = ggml_row_bytes(GgmlType::Q8_0, cols);
  std::vector<uint8_t> q(rb * static_cast<size_t>(rows));  // [rows][rb]
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(GgmlType::Q8_0, values.data() + r * cols, q.data() + r * rb, cols);
  GgufWriter w;
  w.set_string("general.name", "layout");
  ASSERT_TRUE(w.add_tensor("w.weight", GgmlType::Q8_0, {cols, rows}, q.data(), q.size()).ok());
  const std::string path = (testing::temp_dir() / "layout.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  auto mapped = GgufFile::open(path, FileMemory::kMapped);
  auto copied = GgufFile::open(path, FileMemory::kHugePages);
  ASSERT_TRUE(mapped.ok() && copied.ok());
  const std::vector<std::string> names = {"w.weight"};
  ASSERT_TRUE((*copied)->rewrite_tensors(names, interleave_for_matmul).ok());
  ASSERT_EQ((*copied)->view("w.weight").layout, TensorLayout::kInterleaved16);
  EXPECT_EQ(model_fingerprint(**copied), model_fingerprint(**mapped));
}

TEST(SessionFingerprint, GroupMapFingerprintFollowsTheLayout) {
  const auto a = HeadGroupMap::contiguous(2, 4, 2).value();
  const auto same = HeadGroupMap::from_groups(4, 2, {{{0, 1}, {2, 3}}, {{0, 1}, {2, 3}}}).value();
  const auto columns =
      HeadGroupMap::from_groups(4, 2, {{{1, 0}, {2, 3}}, {{0, 1}, {2, 3}}}).value();
  const auto regrouped =
      HeadGroupMap::from_groups(4, 2, {{{0, 2}, {1, 3}}, {{0, 1}, {2, 3}}}).value();
  const auto wider = HeadGroupMap::contiguous(2, 4, 4).value();
  const auto wider_pages =
      HeadGroupMap::from_groups(4, 4, {{{0, 1}, {2, 3}}, {{0, 1}, {2, 3}}}).value();
  const uint64_t fa = group_map_fingerprint(a);
  EXPECT_EQ(group_map_fingerprint(same), fa);
  EXPECT_NE(group_map_fingerprint(columns), fa);
  EXPECT_NE(group_map_fingerprint(regrouped), fa);
  EXPECT_NE(group_map_fingerprint(wider), fa);
  EXPECT_NE(group_map_fingerprint(wider_pages), fa);
  // Groups across layers: the same heads in other groups or group order are other maps.
  const auto across =
      HeadGroupMap::from_flat_groups(2, 4, 2, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}).value();
  const auto across_same =
      HeadGroupMap::from_flat_groups(2, 4, 2, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}).value();
  const auto across_swapped =
      HeadGroupMap::from_flat_groups(2, 4, 2, {{1, 5}, {0, 4}, {2, 6}, {3, 7}}).value();
  const auto across_mixed =
      HeadGroupMap::from_flat_groups(2, 4, 2, {{0, 5}, {1, 4}, {2, 6}, {3, 7}}).value();
  const uint64_t fx = group_map_fingerprint(across);
  EXPECT_EQ(group_map_fingerprint(across_same), fx);
  EXPECT_NE(fx, fa);
  EXPECT_NE(group_map_fingerprint(across_swapped), fx);
  EXPECT_NE(group_map_fingerprint(across_mixed), fx);
  // Flat groups of one layer each are the per-layer map itself.
  EXPECT_EQ(group_map_fingerprint(
                HeadGroupMap::from_flat_groups(2, 4, 2, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}).value()),
            fa);
}

TEST(SessionFingerprint, BytesAndMismatchReasons) {
  EXPECT_EQ(bytes_fingerprint(""), 0u);
  EXPECT_NE(bytes_fingerprint("{\"profile\":1}"), bytes_fingerprint("{\"profile\":2}"));
  const SessionFingerprint f{1, KvType::F16, 2, 3};
  EXPECT_EQ(fingerprint_mismatch(f, f), "");
  SessionFingerprint g = f;
  g.model = 9;
  g.group_map = 9;
  EXPECT_NE(fingerprint_mismatch(f, g).find("model fingerprint differs"), std::string::npos);
  g = f;
  g.kv_type = KvType::F32;
  EXPECT_NE(fingerprint_mismatch(f, g).find("KV element type differs (session f16, expected f32)"),
            std::string::npos)
      << fingerprint_mismatch(f, g);
  g = f;
  g.profile = 0;
  EXPECT_NE(fingerprint_mismatch(f, g).find("profile fingerprint differs"), std::string::npos);
  g = f;
  g.group_map = 4;
  EXPECT_NE(fingerprint_mismatch(f, g).find("head-group map fingerprint differs"),
            std::string::npos);
}

}  // namespace
}  // namespace tangram
