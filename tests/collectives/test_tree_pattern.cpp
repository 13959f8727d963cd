// Binomial trees, chains and recursive doubling: structure checked for many sizes and roots,
// and recursive doubling's data flow simulated symbolically.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "collectives/tree_pattern.h"

namespace terse {
namespace {

TEST(BinomialTree, EightRanksFromRootZero) {
  EXPECT_EQ(BinomialTree(0, 8, 0).children(), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(BinomialTree(4, 8, 0).children(), (std::vector<int>{5, 6}));
  EXPECT_EQ(BinomialTree(6, 8, 0).children(), (std::vector<int>{7}));
  EXPECT_EQ(BinomialTree(7, 8, 0).parent(), 6);
  EXPECT_EQ(BinomialTree(0, 8, 0).parent(), -1);
  EXPECT_EQ(BinomialTree(4, 8, 0).subtree_size(), 4);
  EXPECT_EQ(BinomialTree(0, 8, 0).subtree_size(), 8);
}

class TreeShapes : public ::testing::TestWithParam<int> {};

TEST_P(TreeShapes, BinomialTreeSpansEveryRankOnceFromAnyRoot) {
  const int n = GetParam();
  int max_depth = 0;
  while ((1 << max_depth) < n) ++max_depth;
  for (int root = 0; root < n; ++root) {
    std::vector<int> seen(n, 0);
    for (int r = 0; r < n; ++r) {
      BinomialTree tree(r, n, root);
      EXPECT_EQ(tree.is_root(), r == root);
      int children_total = 1;
      for (int child : tree.children()) {
        ASSERT_GE(child, 0);
        ASSERT_LT(child, n);
        EXPECT_EQ(BinomialTree(child, n, root).parent(), r);
        ++seen[child];
        children_total += BinomialTree(child, n, root).subtree_size();
      }
      EXPECT_EQ(tree.subtree_size(), children_total);
      // Children in order of their subtrees' span 2^k (only the edge of the rank range can
      // cut a subtree short): child k holds at most 2^k ranks.
      int mask = 1;
      for (int child : tree.children()) {
        const BinomialTree sub(child, n, root);
        EXPECT_EQ(sub.relative_rank(), tree.relative_rank() + mask);
        EXPECT_LE(sub.subtree_size(), mask);
        mask <<= 1;
      }
      // Depth: hops to the root.
      int depth = 0;
      for (int at = r; at != root; at = BinomialTree(at, n, root).parent()) ++depth;
      EXPECT_LE(depth, max_depth);
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], r == root ? 0 : 1) << "rank " << r;
  }
}

TEST_P(TreeShapes, ChainVisitsRanksInOrderFromTheRoot) {
  const int n = GetParam();
  for (int root = 0; root < n; ++root) {
    int at = root, visited = 1;
    while (!Chain(at, n, root).children().empty()) {
      const int next = Chain(at, n, root).children()[0];
      EXPECT_EQ(next, (at + 1) % n);
      EXPECT_EQ(Chain(next, n, root).parent(), at);
      at = next;
      ++visited;
    }
    EXPECT_EQ(visited, n);
    EXPECT_EQ(Chain(root, n, root).parent(), -1);
  }
}

TEST_P(TreeShapes, RecursiveDoublingCombinesEveryRankOnce) {
  const int n = GetParam();
  std::vector<std::set<int>> held(n);
  for (int r = 0; r < n; ++r) held[r] = {r};
  // Fold: each folded rank's data goes to its host.
  for (int r = 0; r < n; ++r) {
    RecursiveDoubling me(r, n);
    if (me.role() == RecursiveDoubling::Role::kFolded) {
      const int host = me.fold_partner();
      ASSERT_EQ(RecursiveDoubling(host, n).role(), RecursiveDoubling::Role::kFoldHost);
      ASSERT_EQ(RecursiveDoubling(host, n).fold_partner(), r);
      EXPECT_EQ(me.exchange_rank(), -1);
      held[host].insert(r);
    }
  }
  RecursiveDoubling any(0, n);
  EXPECT_LE(any.power_of_two(), n);
  EXPECT_GT(2 * any.power_of_two(), n);
  std::set<int> exchangers;
  for (int e = 0; e < any.power_of_two(); ++e) {
    const int r = any.rank_of_exchanger(e);
    EXPECT_EQ(RecursiveDoubling(r, n).exchange_rank(), e);
    exchangers.insert(r);
  }
  EXPECT_EQ(exchangers.size(), static_cast<size_t>(any.power_of_two()));
  for (int round = 0; round < any.rounds(); ++round) {
    auto before = held;
    for (int r : exchangers) {
      const int partner = RecursiveDoubling(r, n).round_partner(round);
      ASSERT_EQ(RecursiveDoubling(partner, n).round_partner(round), r);
      for (int source : before[partner]) {
        ASSERT_EQ(held[r].count(source), 0u) << "counted twice";
        held[r].insert(source);
      }
    }
  }
  for (int r : exchangers) EXPECT_EQ(held[r].size(), static_cast<size_t>(n));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TreeShapes, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 12, 17));

}  // namespace
}  // namespace terse
