// read_file_text: whole files, pipes and procfs files (whose size is unknown beforehand), and the
// cap that keeps a wrong path from exhausting memory.
#include "common/file_text.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace tangram {
namespace {

namespace fs = std::filesystem;

fs::path write_temp(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

TEST(FileText, ReadsEveryByteIncludingNulAndAcrossBlocks) {
  std::string bytes(200'000, 'x');  // more than one 64 KiB block
  bytes[5] = '\0';
  bytes.back() = 'z';
  const fs::path p = write_temp("file_text_blocks", bytes);
  auto text = read_file_text(p.string());
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, bytes);
  fs::remove(p);
}

TEST(FileText, EmptyFileIsEmptyText) {
  const fs::path p = write_temp("file_text_empty", "");
  auto text = read_file_text(p.string());
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_TRUE(text->empty());
  fs::remove(p);
}

TEST(FileText, MissingFileNamesWhatAndWhereAndWhy) {
  auto text = read_file_text("/nonexistent/dir/x.txt", "the recall set");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.message().find("the recall set"), std::string::npos) << text.message();
  EXPECT_NE(text.message().find("/nonexistent/dir/x.txt"), std::string::npos);
  EXPECT_NE(text.message().find("No such file"), std::string::npos) << text.message();
}

TEST(FileText, ADirectoryIsAnErrorNotEmptyText) {
  auto text = read_file_text(fs::temp_directory_path().string(), "the trace");
  EXPECT_FALSE(text.ok());
}

TEST(FileText, CapRefusesLargerFilesAndAcceptsOneAtTheCap) {
  const fs::path p = write_temp("file_text_cap", std::string(1000, 'a'));
  EXPECT_TRUE(read_file_text(p.string(), "file", 1000).ok());
  auto over = read_file_text(p.string(), "the profile", 999);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("larger than"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("the profile"), std::string::npos);
  fs::remove(p);
}

TEST(FileText, CapHoldsOnAnEndlessStream) {
  // /dev/zero never ends and reports no size: only a cap checked while reading stops it.
  auto text = read_file_text("/dev/zero", "file", 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.message().find("larger than"), std::string::npos) << text.message();
}

TEST(FileText, ReadsProcfsFilesWhoseSizeIsZero) {
  auto text = read_file_text("/proc/self/status");
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_NE(text->find("Pid:"), std::string::npos);
}

}  // namespace
}  // namespace tangram
