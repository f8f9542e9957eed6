#include "common/units.h"

#include <gtest/gtest.h>

namespace tangram {
namespace {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*parse_bytes("17"), 17u);
  EXPECT_EQ(*parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(*parse_bytes("2gib"), 2ull << 30);
  EXPECT_EQ(*parse_bytes("512MB"), 512'000'000u);
  EXPECT_EQ(*parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(*parse_bytes("3K"), 3000u);
  EXPECT_EQ(*parse_bytes("1TiB"), 1ull << 40);
}

TEST(Units, RejectsGarbage) {
  for (const char* bad : {"", "abc", "-1", "5XB", "1e40", "nan"}) {
    auto r = parse_bytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(parse_bytes("5XB").message().find("unknown unit"), std::string::npos);
}

TEST(Units, ParsesDurations) {
  EXPECT_EQ(*parse_duration("90"), 90.0);
  EXPECT_EQ(*parse_duration("90s"), 90.0);
  EXPECT_EQ(*parse_duration("10m"), 600.0);
  EXPECT_EQ(*parse_duration("1.5h"), 5400.0);
  EXPECT_EQ(*parse_duration("250ms"), 0.25);
  for (const char* bad : {"", "m", "-5s", "10d", "nan", "5 s"})
    EXPECT_FALSE(parse_duration(bad).ok()) << bad;
  EXPECT_NE(parse_duration("10d").message().find("unknown unit"), std::string::npos);
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3.0 * (1 << 30)), "3.00 GiB");
}

}  // namespace
}  // namespace tangram
