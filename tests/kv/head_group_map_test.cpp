#include "kv/head_group_map.h"

#include <gtest/gtest.h>

#include <vector>

namespace tangram {
namespace {

using Groups = std::vector<std::vector<std::vector<int>>>;

TEST(HeadGroupMap, ContiguousRunsOfG) {
  auto m = HeadGroupMap::contiguous(2, 8, 4);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->total_groups(), 4);
  EXPECT_EQ(m->n_groups(1), 2);
  EXPECT_EQ(m->flat_group(1, 1), 3);
  EXPECT_EQ(m->group_of(1, 5), 3);
  EXPECT_EQ(m->column_of(1, 5), 1);
  EXPECT_EQ(std::vector<int>(m->members(2).begin(), m->members(2).end()), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(m->is_contiguous());
}

TEST(HeadGroupMap, LastGroupMayBeShorter) {
  auto m = HeadGroupMap::contiguous(1, 6, 4);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->n_groups(0), 2);
  EXPECT_EQ(m->members(1).size(), 2u);
  EXPECT_EQ(m->column_of(0, 5), 1);
}

TEST(HeadGroupMap, UnifiedAndSingleHeadAreOrdinaryMaps) {
  auto unified = HeadGroupMap::contiguous(3, 8, 8);
  ASSERT_TRUE(unified.ok());
  EXPECT_EQ(unified->total_groups(), 3);
  EXPECT_EQ(unified->column_of(2, 7), 7);
  auto single = HeadGroupMap::contiguous(3, 8, 1);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->total_groups(), 24);
  EXPECT_EQ(single->group_of(2, 7), 23);
  EXPECT_EQ(single->column_of(2, 7), 0);
}

TEST(HeadGroupMap, ArbitraryGroupsPerLayer) {
  const Groups g{{{7, 2, 5}, {0}, {1, 3, 4, 6}}, {{6, 1}, {0, 7}, {2, 3}, {4, 5}}};
  auto m = HeadGroupMap::from_groups(8, 4, g);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->n_groups(0), 3);
  EXPECT_EQ(m->n_groups(1), 4);
  EXPECT_EQ(m->total_groups(), 7);
  EXPECT_EQ(m->group_of(0, 5), 0);
  EXPECT_EQ(m->column_of(0, 5), 2);
  EXPECT_EQ(m->group_of(1, 7), 4);
  EXPECT_EQ(m->column_of(1, 7), 1);
  EXPECT_FALSE(m->is_contiguous());
}

TEST(HeadGroupMap, RejectsInvalidMaps) {
  // A head twice.
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{{{0, 1}, {1, 2, 3}}}).ok());
  // A head missing.
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{{{0, 1, 2}}}).ok());
  // Out of range.
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{{{0, 1, 2, 4}, {3}}}).ok());
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{{{0, 1, 2, -1}, {3}}}).ok());
  // Larger than G.
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 2, Groups{{{0, 1, 2}, {3}}}).ok());
  // Empty group, no layers, bad sizes.
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{{{0, 1, 2, 3}, {}}}).ok());
  EXPECT_FALSE(HeadGroupMap::from_groups(4, 4, Groups{}).ok());
  EXPECT_FALSE(HeadGroupMap::contiguous(0, 8, 4).ok());
  EXPECT_FALSE(HeadGroupMap::contiguous(2, 8, 0).ok());
  // The second layer is checked too.
  EXPECT_FALSE(HeadGroupMap::from_groups(2, 2, Groups{{{0, 1}}, {{0}}}).ok());
}

}  // namespace
}  // namespace tangram
