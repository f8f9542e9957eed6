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
  EXPECT_EQ(m->layer_groups(1).size(), 2u);
  EXPECT_EQ(m->layer_groups(1)[1].flat_group, 3);
  EXPECT_EQ(m->group_of(1, 5), 3);
  EXPECT_EQ(m->column_of(1, 5), 1);
  EXPECT_EQ(std::vector<int>(m->members(2).begin(), m->members(2).end()),
            (std::vector<int>{8, 9, 10, 11}));
  EXPECT_TRUE(m->is_contiguous());
  EXPECT_TRUE(m->per_layer());
}

TEST(HeadGroupMap, LastGroupMayBeShorter) {
  auto m = HeadGroupMap::contiguous(1, 6, 4);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layer_groups(0).size(), 2u);
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
  EXPECT_EQ(m->layer_groups(0).size(), 3u);
  EXPECT_EQ(m->layer_groups(1).size(), 4u);
  EXPECT_EQ(m->total_groups(), 7);
  EXPECT_EQ(m->group_of(0, 5), 0);
  EXPECT_EQ(m->column_of(0, 5), 2);
  EXPECT_EQ(m->group_of(1, 7), 4);
  EXPECT_EQ(m->column_of(1, 7), 1);
  EXPECT_FALSE(m->is_contiguous());
}

TEST(HeadGroupMap, GroupsAcrossLayers) {
  // 3 layers x 2 KV heads; flat head = layer * 2 + kv_head.
  auto m = HeadGroupMap::from_flat_groups(3, 2, 4, {{5, 0, 2}, {1, 4, 3}});
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->per_layer());
  EXPECT_FALSE(m->is_contiguous());
  EXPECT_EQ(m->total_groups(), 2);
  EXPECT_EQ(m->group_of(2, 1), 0);
  EXPECT_EQ(m->column_of(2, 1), 0);
  EXPECT_EQ(m->group_of(1, 1), 1);
  EXPECT_EQ(m->column_of(1, 1), 2);
  EXPECT_EQ(m->layer_of_head(5), 2);
  EXPECT_EQ(m->kv_head_of(5), 1);
  // Layer 0: group 0 holds head 0, group 1 holds head 1.
  ASSERT_EQ(m->layer_groups(0).size(), 2u);
  EXPECT_EQ(m->layer_groups(0)[0].flat_group, 0);
  EXPECT_EQ(m->layer_groups(0)[1].flat_group, 1);
  EXPECT_EQ(std::vector<int>(m->layer_heads(0).begin(), m->layer_heads(0).end()),
            (std::vector<int>{0, 1}));
  // Layer 2: head 1 (flat 5) is in group 0, head 0 (flat 4) in group 1: group order.
  ASSERT_EQ(m->layer_groups(2).size(), 2u);
  EXPECT_EQ(std::vector<int>(m->layer_heads(2).begin(), m->layer_heads(2).end()),
            (std::vector<int>{1, 0}));
  // Layer 1: head 0 (flat 2) in group 0, head 1 (flat 3) in group 1.
  const std::vector<int> per_layer_groups{m->layer_groups(1)[0].flat_group,
                                          m->layer_groups(1)[1].flat_group};
  EXPECT_EQ(per_layer_groups, (std::vector<int>{0, 1}));
  // group_max reads the flat per-head array.
  const std::vector<int> len{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(m->group_max(0, std::span<const int>(len)), 6);
  EXPECT_EQ(m->group_max(1, std::span<const int>(len)), 5);
}

TEST(HeadGroupMap, TwoLayerHeadsOfOneGroupAreAdjacentInLayerOrder) {
  // One group of all four heads: layer 0's head 1 (column 1) before its head 0 (column 3).
  auto m = HeadGroupMap::from_flat_groups(2, 2, 4, {{2, 1, 3, 0}});
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->layer_groups(0).size(), 1u);
  EXPECT_EQ(m->layer_groups(0)[0].begin, 0);
  EXPECT_EQ(m->layer_groups(0)[0].end, 2);
  EXPECT_EQ(std::vector<int>(m->layer_heads(0).begin(), m->layer_heads(0).end()),
            (std::vector<int>{1, 0}));
  EXPECT_EQ(std::vector<int>(m->layer_heads(1).begin(), m->layer_heads(1).end()),
            (std::vector<int>{0, 1}));
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
  // Flat groups: a head twice, a head missing, out of range.
  EXPECT_FALSE(HeadGroupMap::from_flat_groups(2, 2, 2, {{0, 3}, {3, 1}, {2}}).ok());
  EXPECT_FALSE(HeadGroupMap::from_flat_groups(2, 2, 2, {{0, 3}, {1}}).ok());
  EXPECT_FALSE(HeadGroupMap::from_flat_groups(2, 2, 2, {{0, 3}, {1, 2}, {4}}).ok());
  // The second layer is checked too.
  EXPECT_FALSE(HeadGroupMap::from_groups(2, 2, Groups{{{0, 1}}, {{0}}}).ok());
}

}  // namespace
}  // namespace tangram
