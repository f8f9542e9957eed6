// GgufFile's two ways to hold a file (FileMemory): the huge-page copy must give every tensor the
// file's own bytes, as the memory map does, start on a 2 MiB boundary, and report its progress.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace tangram {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ProgressLog {
  std::vector<size_t> done;
  size_t total = 0;
};

// Every tensor of `f` holds the bytes at its offset in `bytes` (the file as read from disk).
void expect_file_bytes(const GgufFile& f, const std::vector<uint8_t>& bytes) {
  ASSERT_EQ(f.file_size(), bytes.size());
  ASSERT_FALSE(f.tensors().empty());
  for (const GgufTensorInfo& t : f.tensors()) {
    const TensorView v = f.view(t);
    const size_t at = f.data_offset() + t.offset;
    ASSERT_LE(at + t.nbytes, bytes.size()) << t.name;
    EXPECT_EQ(std::memcmp(v.data, bytes.data() + at, t.nbytes), 0) << t.name;
  }
}

void check_copy_against_map(const std::string& path, size_t min_progress_calls) {
  const std::vector<uint8_t> bytes = read_all(path);
  ProgressLog log;
  auto copied = GgufFile::open(path, FileMemory::kHugePages, [&log](size_t done, size_t total) {
    log.done.push_back(done);
    log.total = total;
  });
  ASSERT_TRUE(copied.ok()) << copied.message();
  auto mapped = GgufFile::open(path, FileMemory::kMapped);
  ASSERT_TRUE(mapped.ok()) << mapped.message();
  const GgufFile& c = **copied;
  const GgufFile& m = **mapped;
  expect_file_bytes(c, bytes);
  expect_file_bytes(m, bytes);
  EXPECT_EQ(c.metadata().size(), m.metadata().size());
  EXPECT_EQ(c.tensors().size(), m.tensors().size());
  EXPECT_EQ(c.data_offset(), m.data_offset());

  // The copy starts on a huge-page boundary (where the kernel can back it with 2 MiB pages).
  const GgufTensorInfo& first = c.tensors().front();
  const auto start =
      reinterpret_cast<uintptr_t>(c.view(first).data) - c.data_offset() - first.offset;
  EXPECT_EQ(start % (uintptr_t{2} << 20), 0u);

  // Progress: rising, ending at the file's size.
  ASSERT_GE(log.done.size(), min_progress_calls);
  EXPECT_EQ(log.total, bytes.size());
  EXPECT_EQ(log.done.back(), bytes.size());
  for (size_t i = 1; i < log.done.size(); ++i) EXPECT_GT(log.done[i], log.done[i - 1]);
}

TEST(GgufFileMemory, HugePageCopyHoldsTheFilesBytes) {
  check_copy_against_map(testing::data_file("models/stories260K/stories260K.gguf").string(), 1);
}

// A file larger than one read chunk (64 MiB): every chunk lands where it belongs.
TEST(GgufFileMemory, CopyAcrossReadChunks) {
  constexpr int64_t kCols = 4096, kRows = 4200;  // 4096 x 4200 floats: 65.6 MiB
  std::vector<float> data(static_cast<size_t>(kCols * kRows));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 65521) * 0.5f;
  GgufWriter w;
  w.set_string("general.architecture", "test");
  ASSERT_TRUE(w.add_tensor("first", GgmlType::F32, {16}, data.data(), 16 * sizeof(float)).ok());
  ASSERT_TRUE(
      w.add_tensor("big", GgmlType::F32, {kCols, kRows}, data.data(), data.size() * sizeof(float))
          .ok());
  const std::string path = (testing::temp_dir() / "chunks.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  check_copy_against_map(path, 2);
}

TEST(GgufFileMemory, ACopyThatDoesNotFitFallsBackToTheMap) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(file_memory_for(FileMemory::kHugePages, 100 * kMiB, 200 * kMiB),
            FileMemory::kHugePages);
  EXPECT_EQ(file_memory_for(FileMemory::kHugePages, 100 * kMiB, 100 * kMiB),
            FileMemory::kHugePages);
  EXPECT_EQ(file_memory_for(FileMemory::kHugePages, 100 * kMiB + 1, 100 * kMiB),
            FileMemory::kMapped);
  EXPECT_EQ(file_memory_for(FileMemory::kHugePages, 100 * kMiB, std::nullopt),
            FileMemory::kHugePages);
  EXPECT_EQ(file_memory_for(FileMemory::kMapped, 1, 200 * kMiB), FileMemory::kMapped);
}

TEST(GgufFileMemory, OpenSaysHowItHoldsTheFile) {
  const std::string path = testing::data_file("models/stories260K/stories260K.gguf").string();
  for (const FileMemory memory : {FileMemory::kMapped, FileMemory::kHugePages}) {
    auto r = GgufFile::open(path, memory);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ((*r)->memory(), memory);  // a 1 MiB file fits in any machine that runs the tests
  }
}

// rewrite_tensors: only in a huge-page copy, only the named tensors, each with its own bytes
// writable; the layout it returns is recorded in the tensor's info and later views.
TEST(GgufFileMemory, RewriteTensorsInTheHugePageCopyOnly) {
  const std::string path = testing::data_file("models/stories260K/stories260K.gguf").string();
  const std::string name = "blk.0.attn_q.weight";
  const std::vector<std::string> names = {name};
  const auto invert = [](const TensorView& v, uint8_t* bytes) {
    for (size_t i = 0; i < v.nbytes; ++i) bytes[i] = static_cast<uint8_t>(~bytes[i]);
    return TensorLayout::kInterleaved16;
  };
  auto mapped = GgufFile::open(path, FileMemory::kMapped);
  ASSERT_TRUE(mapped.ok()) << mapped.message();
  EXPECT_FALSE((*mapped)->rewrite_tensors(names, invert).ok());

  auto copied = GgufFile::open(path, FileMemory::kHugePages);
  ASSERT_TRUE(copied.ok()) << copied.message();
  GgufFile& f = **copied;
  const std::vector<std::string> unknown = {"no.such.tensor"};
  EXPECT_FALSE(f.rewrite_tensors(unknown, invert).ok());
  const std::vector<uint8_t> bytes = read_all(path);
  ASSERT_TRUE(f.rewrite_tensors(names, invert).ok());
  ASSERT_TRUE(f.rewrite_tensors(names, invert).ok());  // already rewritten: left alone
  for (const GgufTensorInfo& t : f.tensors()) {
    const TensorView v = f.view(t);
    const uint8_t* file = bytes.data() + f.data_offset() + t.offset;
    const bool rewritten = t.name == name;
    EXPECT_EQ(v.layout, rewritten ? TensorLayout::kInterleaved16 : TensorLayout::kRowMajor)
        << t.name;
    for (size_t i = 0; i < t.nbytes; ++i)
      ASSERT_EQ(v.data[i], rewritten ? static_cast<uint8_t>(~file[i]) : file[i])
          << t.name << " " << i;
  }
}

TEST(GgufFileMemory, MissingFileIsAnErrorEitherWay) {
  const std::string path = (testing::temp_dir() / "absent.gguf").string();
  for (const FileMemory memory : {FileMemory::kMapped, FileMemory::kHugePages}) {
    auto r = GgufFile::open(path, memory);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("absent.gguf"), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace tangram
