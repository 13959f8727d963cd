#include <gtest/gtest.h>

#include "topology/node_layout.h"

namespace terse {
namespace {

TEST(NodeLayout, NodesNumberedByTheirLowestRank) {
  // TERSE_HOSTID-style identities, interleaved: node 0 holds rank 0, node 1 rank 1.
  const NodeLayout layout = group_into_nodes({"node-b", "node-a", "node-b", "node-a", "node-c"});
  EXPECT_EQ(layout.node_of, (std::vector<int>{0, 1, 0, 1, 2}));
  ASSERT_EQ(layout.node_count(), 3);
  EXPECT_EQ(layout.members[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.members[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(layout.members[2], (std::vector<int>{4}));
  EXPECT_EQ(layout.local_index(0), 0);
  EXPECT_EQ(layout.local_index(2), 1);
  EXPECT_EQ(layout.local_index(3), 1);
  EXPECT_EQ(layout.local_index(4), 0);
  EXPECT_EQ(layout.local_index(5), -1);
  EXPECT_EQ(layout.local_index(-1), -1);
  EXPECT_TRUE(layout.multi_node());
  EXPECT_TRUE(layout.node_with_several_ranks());
}

TEST(NodeLayout, RealHostIdentitiesWithBootIds) {
  const std::string a = "gpu17:6f1c0e6e-1b0a-4d55-9f0f-2f0b5d8e0a11";
  const std::string b = "gpu17:0c4e3d55-77aa-4a9e-b1b1-0a3e6f7b2c22";  // same name, rebooted/other
  const NodeLayout layout = group_into_nodes({a, a, b, b});
  EXPECT_EQ(layout.node_count(), 2);
  EXPECT_EQ(layout.node_of, (std::vector<int>{0, 0, 1, 1}));
}

TEST(NodeLayout, OneHostOrOneRankPerHost) {
  const NodeLayout one = group_into_nodes({"h", "h", "h"});
  EXPECT_FALSE(one.multi_node());
  EXPECT_TRUE(one.node_with_several_ranks());
  EXPECT_EQ(one.members[0], (std::vector<int>{0, 1, 2}));
  const NodeLayout spread = group_into_nodes({"h0", "h1", "h2"});
  EXPECT_TRUE(spread.multi_node());
  EXPECT_FALSE(spread.node_with_several_ranks());
  const NodeLayout empty_names = group_into_nodes({"", "", "x"});  // "" is a host like any other
  EXPECT_EQ(empty_names.node_of, (std::vector<int>{0, 0, 1}));
  const NodeLayout none = group_into_nodes({});
  EXPECT_EQ(none.node_count(), 0);
  EXPECT_FALSE(none.multi_node());
}

}  // namespace
}  // namespace terse
