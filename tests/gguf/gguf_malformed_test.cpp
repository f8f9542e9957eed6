// Malformed GGUF files: truncations at every header position, seeded byte flips and crafted
// corruptions must each give one clean Error naming the file and a byte offset (never a crash,
// an exception or an out-of-bounds read; run this suite under the sanitizer build too).
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using testing::expect_located_error;
using testing::RawGguf;
using testing::temp_dir;
using testing::write_bytes;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// A valid file exercising every structure: scalars, string/int/float arrays, an alignment
// key, and tensors of block-quantised and plain types.
std::string valid_file_bytes(const std::filesystem::path& dir) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_u64("big", 1ull << 40);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "bc"});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f, -3.5f, 4.25f});
  w.set_alignment(64);
  std::vector<uint8_t> data(2048);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 7 + 3);
  EXPECT_TRUE(w.add_tensor("token_embd.weight", GgmlType::F32, {8, 5}, data.data(), 160).ok());
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", GgmlType::Q4_0, {32, 4}, data.data(), 72).ok());
  EXPECT_TRUE(w.add_tensor("blk.0.ffn_up.weight", GgmlType::Q6_K, {256, 2}, data.data(), 420).ok());
  EXPECT_TRUE(w.add_tensor("output_norm.weight", GgmlType::F16, {8}, data.data(), 16).ok());
  const auto path = dir / "valid.gguf";
  EXPECT_TRUE(w.write(path.string()).ok());
  return testing::read_file(path);
}

// Checks a parse result: on failure the message shape (returning the offset), on success that
// the parsed directory stays inside the file (returning -1).
int64_t check_result(const Result<std::unique_ptr<GgufFile>>& r, const std::string& path,
                     size_t size) {
  if (!r.ok()) return expect_located_error(r.message(), path, size);
  const GgufFile& f = **r;
  EXPECT_EQ(f.file_size(), size);
  EXPECT_LE(f.data_offset(), f.file_size());
  EXPECT_NE(f.alignment(), 0u);
  EXPECT_EQ(f.alignment() & (f.alignment() - 1), 0u);
  for (const auto& t : f.tensors()) {
    EXPECT_LE(t.offset, f.file_size() - f.data_offset()) << t.name;
    EXPECT_LE(t.nbytes, f.file_size() - f.data_offset() - t.offset) << t.name;
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
  }
  for (const auto& kv : f.metadata()) (void)kv.value.to_string();  // rendering must not crash
  return -1;
}

// Parses `bytes` twice: from an exact-size heap copy (so AddressSanitizer sees any over-read)
// and from a file at `path` through mmap. Both must agree.
int64_t open_bytes(const std::string& path, const std::string& bytes, bool* ok_out = nullptr) {
  auto from_memory = GgufFile::open_memory(path, bytes.data(), bytes.size());
  const int64_t off = check_result(from_memory, path, bytes.size());
  write_bytes(path, bytes);
  auto from_file = GgufFile::open(path);
  (void)check_result(from_file, path, bytes.size());
  EXPECT_EQ(from_memory.ok(), from_file.ok());
  if (!from_memory.ok() && !from_file.ok()) {
    EXPECT_EQ(from_memory.message(), from_file.message());
  }
  if (ok_out) *ok_out = from_memory.ok();
  return off;
}

// Byte just past the last tensor's data: truncating at or after it still leaves a valid file.
size_t end_of_tensor_data(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return 0;
  size_t end = (*r)->data_offset();
  for (const auto& t : (*r)->tensors())
    end = std::max(end, (*r)->data_offset() + t.offset + t.nbytes);
  return end;
}

TEST(GgufMalformed, TruncationAtEveryPosition) {
  const auto dir = temp_dir();
  const std::string good = valid_file_bytes(dir);
  const size_t needed = end_of_tensor_data((dir / "valid.gguf").string());
  ASSERT_GT(needed, 300u);
  size_t data_offset = 0;
  {
    auto r = GgufFile::open((dir / "valid.gguf").string());
    ASSERT_TRUE(r.ok());
    data_offset = (*r)->data_offset();
  }
  const auto path = (dir / "cut.gguf").string();
  // Every byte of header, metadata and tensor directory; then every 5th byte of the data.
  for (size_t len = 0; len <= good.size(); len += len < data_offset ? 1 : 5) {
    SCOPED_TRACE(len);
    bool ok = false;
    const int64_t off = open_bytes(path, good.substr(0, len), &ok);
    EXPECT_EQ(ok, len >= needed);
    if (!ok) {
      EXPECT_LE(off, static_cast<int64_t>(len));
    }
  }
}

TEST(GgufMalformed, SeededByteFlips) {
  const auto dir = temp_dir();
  const std::string good = valid_file_bytes(dir);
  size_t data_offset = 0;
  {
    auto r = GgufFile::open((dir / "valid.gguf").string());
    ASSERT_TRUE(r.ok());
    data_offset = (*r)->data_offset();
  }
  const auto path = (dir / "flip.gguf").string();
  std::mt19937 rng(1234);
  int n_errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    // Mostly inside the header region, where every byte matters; sometimes anywhere.
    const size_t span = iter % 4 == 0 ? bad.size() : data_offset;
    const int n_flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n_flips; ++k) {
      const size_t pos = rng() % span;
      bad[pos] = static_cast<char>(bad[pos] ^ static_cast<char>(1 + rng() % 255));
    }
    SCOPED_TRACE(iter);
    bool ok = false;
    (void)open_bytes(path, bad, &ok);
    n_errors += ok ? 0 : 1;
  }
  EXPECT_GT(n_errors, 1000);  // the suite really exercises the error paths
}

TEST(GgufMalformed, SeededExtremeFieldOverwrites) {
  // Overwrite 8 bytes at random header positions with values that stress length/count checks.
  const auto dir = temp_dir();
  const std::string good = valid_file_bytes(dir);
  const auto path = (dir / "wide.gguf").string();
  const uint64_t extremes[] = {
      kU64Max,     kU64Max / 2,     1ull << 32, 1ull << 62, 0x7fffffffffffffffull,
      good.size(), good.size() - 7, 0};
  std::mt19937 rng(99);
  for (int iter = 0; iter < 1500; ++iter) {
    std::string bad = good;
    const size_t pos = rng() % (600 - 8);
    const uint64_t v = extremes[rng() % std::size(extremes)];
    std::memcpy(bad.data() + pos, &v, 8);
    SCOPED_TRACE(iter);
    (void)open_bytes(path, bad);
  }
}

struct Crafted {
  std::string name;
  std::string bytes;
  int64_t offset;                     // expected error offset
  std::vector<std::string> mentions;  // substrings the message must contain
};

std::vector<Crafted> crafted_cases() {
  std::vector<Crafted> c;
  auto one_tensor = [](std::string_view name, std::initializer_list<uint64_t> ne, uint32_t type,
                       uint64_t offset, size_t data_bytes) {
    RawGguf g;
    g.header(3, 1, 0).tensor(name, ne, type, offset).pad(32).zeros(data_bytes);
    return g.bytes;
  };
  {
    RawGguf g;
    g.bytes = "GGUX";
    g.u32(3).u64(0).u64(0);
    c.push_back({"bad magic", g.bytes, 0, {"magic"}});
  }
  c.push_back({"version 1", RawGguf().header(1, 0, 0).bytes, 4, {"version 1"}});
  c.push_back({"version 4", RawGguf().header(4, 0, 0).bytes, 4, {"version 4"}});
  c.push_back({"version 0", RawGguf().header(0, 0, 0).bytes, 4, {"version 0"}});
  c.push_back({"big-endian", RawGguf().header(0x03000000, 0, 0).bytes, 4, {"big-endian"}});
  c.push_back({"short header", RawGguf().header(3, 0, 0).bytes.substr(0, 10), 8, {"tensor count"}});
  c.push_back({"huge kv count",
               RawGguf().header(3, 0, kU64Max).bytes,
               16,
               {"metadata count 18446744073709551615"}});
  c.push_back({"huge tensor count", RawGguf().header(3, 1ull << 60, 0).bytes, 8, {"tensor count"}});
  {
    RawGguf g;
    g.header(3, 0, 1).u64(9000000000000000000ull).zeros(40);
    c.push_back(
        {"huge key length", g.bytes, 24, {"length 9000000000000000000 exceeds", "file size 72"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("k").u32(8).u64(1000).zeros(10);
    c.push_back({"string past EOF", g.bytes, 37, {"'k'", "length 1000"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("arr").u32(9).u32(4).u64(1ull << 62).zeros(16);
    c.push_back({"huge array length", g.bytes, 43, {"'arr'", "array length 4611686018427387904"}});
  }
  {
    RawGguf g;  // the second string's length runs past the end
    g.header(3, 0, 1).str("arr").u32(9).u32(8).u64(2).str("ab").u64(50);
    c.push_back({"array string past EOF", g.bytes, 61, {"length 50"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("k").u32(13).u32(0);
    c.push_back({"unknown value type", g.bytes, 33, {"value type 13"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("k").u32(9).u32(200).u64(0);
    c.push_back({"unknown array element type", g.bytes, 37, {"array element type 200"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("k").u32(7).put<uint8_t>(2);
    c.push_back({"bool value 2", g.bytes, 37, {"bool"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).str("k").u32(9).u32(7).u64(2).put<uint8_t>(1).put<uint8_t>(5);
    c.push_back({"bool array value 5", g.bytes, 50, {"bool", "index 1"}});
  }
  {
    RawGguf g;  // arrays of arrays nested 10 deep
    g.header(3, 0, 1).str("k").u32(9);
    for (int d = 0; d < 10; ++d) g.u32(9).u64(1);
    g.u32(4).u64(0);
    c.push_back({"deep nesting", g.bytes, 37 + 8 * 12, {"nested"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2);
    c.push_back({"duplicate key", g.bytes, 41, {"duplicate metadata key 'k'"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).kv_u32("general.alignment", 0);
    c.push_back({"alignment 0", g.bytes, 53, {"general.alignment 0"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).kv_u32("general.alignment", 48);
    c.push_back({"alignment 48", g.bytes, 53, {"general.alignment 48", "power of two"}});
  }
  {
    RawGguf g;
    g.header(3, 0, 1).kv_str("general.alignment", "32");
    c.push_back({"alignment string", g.bytes, 53, {"must be an integer"}});
  }
  c.push_back({"misaligned tensor offset",
               one_tensor("w", {8}, 0, 4, 64),
               24 + 9 + 4 + 8 + 4,
               {"tensor 'w'", "not a multiple of the alignment 32"}});
  c.push_back({"tensor past EOF",
               one_tensor("w", {8}, 0, 32, 32),
               24,
               {"tensor 'w'", "extends past the end of the file"}});
  c.push_back({"tensor data truncated",
               one_tensor("w", {64}, 0, 0, 255),
               24,
               {"tensor 'w'", "extends past the end of the file"}});
  c.push_back({"unsupported type Q5_K",
               one_tensor("blk.0.w", {256}, 13, 0, 256),
               24 + 15 + 4 + 8,
               {"'blk.0.w'", "type id 13", "Q5_K"}});
  c.push_back(
      {"unknown type 99", one_tensor("w", {8}, 99, 0, 64), 24 + 9 + 4 + 8, {"'w'", "type id 99"}});
  c.push_back({"n_dims 5", one_tensor("w", {1, 1, 1, 1, 1}, 0, 0, 64), 24 + 9, {"n_dims 5"}});
  c.push_back({"block size",
               one_tensor("w", {16}, 2, 0, 64),
               24 + 9 + 4 + 8,
               {"ne[0] = 16", "block size 32"}});
  c.push_back({"element overflow",
               one_tensor("w", {1ull << 40, 1ull << 40}, 0, 0, 64),
               24 + 9 + 4 + 8,
               {"overflow"}});
  c.push_back({"negative dim", one_tensor("w", {kU64Max}, 0, 0, 64), 24 + 9 + 4, {"negative"}});
  c.push_back({"byte size overflow",
               one_tensor("w", {1ull << 62}, 0, 0, 64),
               24 + 9 + 4 + 8,
               {"overflow"}});
  {
    RawGguf g;
    g.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64);
    c.push_back({"duplicate tensor", g.bytes, 24 + 33, {"duplicate tensor name 'w'"}});
  }
  {
    RawGguf g;  // a zero-size tensor, but the file stops before the aligned data section
    g.header(3, 1, 0).tensor("w", {0}, 0, 0);
    c.push_back({"data section past EOF", g.bytes, 57, {"data section"}});
  }
  c.push_back({"empty file", "", 0, {"empty"}});
  c.push_back({"three bytes", "GGU", 0, {"magic"}});
  return c;
}

TEST(GgufMalformed, CraftedCorruptions) {
  const auto dir = temp_dir();
  const auto path = (dir / "model.gguf").string();
  for (const auto& c : crafted_cases()) {
    SCOPED_TRACE(c.name);
    bool ok = true;
    const int64_t off = open_bytes(path, c.bytes, &ok);
    ASSERT_FALSE(ok) << c.name;
    EXPECT_EQ(off, c.offset);
    auto r = GgufFile::open_memory(path, c.bytes.data(), c.bytes.size());
    ASSERT_FALSE(r.ok());
    for (const auto& m : c.mentions)
      EXPECT_NE(r.message().find(m), std::string::npos) << r.message();
  }
}

TEST(GgufMalformed, ArrayLengthCap) {
  // 2^24 + 1 one-byte items really present: refused by the cap, not by the bytes-left check.
  const uint64_t n = (uint64_t{1} << 24) + 1;
  RawGguf g;
  g.header(3, 0, 1).str("k").u32(9).u32(0).u64(n).zeros(n);
  auto r = GgufFile::open_memory("big.gguf", g.bytes.data(), g.bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "big.gguf: offset 41: metadata key 'k': array length 16777217 exceeds the supported "
            "maximum 16777216");
  // One item fewer is accepted.
  RawGguf ok;
  ok.header(3, 0, 1).str("k").u32(9).u32(0).u64(n - 1).zeros(n - 1);
  auto r2 = GgufFile::open_memory("ok.gguf", ok.bytes.data(), ok.bytes.size());
  ASSERT_TRUE(r2.ok()) << r2.message();
  EXPECT_EQ((*r2)->find("k")->ints.size(), n - 1);
}

TEST(GgufMalformed, CraftedValidEdgeCases) {
  // Counterparts of the crafted corruptions that must still be accepted.
  const auto dir = temp_dir();
  const auto path = (dir / "model.gguf").string();
  {
    RawGguf g;  // alignment 64 from the file, tensor at offset 64
    g.header(3, 2, 1)
        .kv_u32("general.alignment", 64)
        .tensor("a", {4}, 0, 0)
        .tensor("b", {4}, 0, 64)
        .pad(64);
    g.zeros(80);
    write_bytes(path, g.bytes);
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ((*r)->alignment(), 64u);
    EXPECT_EQ((*r)->data_offset() % 64, 0u);
  }
  {
    RawGguf g;  // vocab-only style: no tensors, no padding after the metadata
    g.header(3, 0, 1).kv_str("general.architecture", "llama");
    write_bytes(path, g.bytes);
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ((*r)->data_offset(), g.bytes.size());
  }
  {
    RawGguf g;  // i64-typed alignment is accepted too
    g.header(3, 0, 1).str("general.alignment").u32(11).put<int64_t>(16);
    write_bytes(path, g.bytes);
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ((*r)->alignment(), 16u);
  }
}

TEST(GgufMalformed, UnopenablePaths) {
  const auto dir = temp_dir();
  auto missing = GgufFile::open((dir / "missing.gguf").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing.gguf"), std::string::npos) << missing.message();
  auto directory = GgufFile::open(dir.string());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.message().find("regular file"), std::string::npos) << directory.message();
}

}  // namespace
}  // namespace tangram
