// The ring's rank arithmetic, checked by simulating the data flow symbolically: which ranks'
// contributions each rank holds for each block after every step.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "collectives/ring_pattern.h"

namespace terse {
namespace {

TEST(RingPattern, NearEqualBlocksCoverTheBufferInOrder) {
  EXPECT_EQ(near_equal_block(10, 4, 0), (ElementRange{0, 3}));
  EXPECT_EQ(near_equal_block(10, 4, 1), (ElementRange{3, 3}));
  EXPECT_EQ(near_equal_block(10, 4, 2), (ElementRange{6, 2}));
  EXPECT_EQ(near_equal_block(10, 4, 3), (ElementRange{8, 2}));
  for (size_t count : {0, 1, 2, 7, 8, 1001}) {
    for (int parts : {1, 2, 3, 8}) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        ElementRange block = near_equal_block(count, parts, i);
        EXPECT_EQ(block.offset, next) << count << " " << parts << " " << i;
        EXPECT_LE(block.count, count / parts + 1);
        EXPECT_GE(block.count, count / parts);
        next += block.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(RingPattern, EqualCountsGiveEqualBlocks) {
  // Reduce-scatter and allgather buffers hold n blocks of `count`: the partition must agree.
  for (int parts : {1, 3, 8}) {
    for (int i = 0; i < parts; ++i) {
      EXPECT_EQ(near_equal_block(5 * parts, parts, i), (ElementRange{size_t(5 * i), 5}));
    }
  }
}

TEST(RingPattern, PipelinePiecesCoverARange) {
  EXPECT_EQ(pipeline_piece_count(0, 4), 1u);
  EXPECT_EQ(pipeline_piece_count(4, 4), 1u);
  EXPECT_EQ(pipeline_piece_count(5, 4), 2u);
  EXPECT_EQ(pipeline_piece_count(5, 0), 1u);
  const ElementRange range{100, 10};
  EXPECT_EQ(pipeline_piece(range, 4, 0), (ElementRange{100, 4}));
  EXPECT_EQ(pipeline_piece(range, 4, 1), (ElementRange{104, 4}));
  EXPECT_EQ(pipeline_piece(range, 4, 2), (ElementRange{108, 2}));
  EXPECT_EQ(pipeline_piece(range, 4, 3).count, 0u);
  EXPECT_EQ(pipeline_piece(range, 0, 0), range);
}

TEST(RingPattern, NeighboursWrap) {
  RingPattern first(0, 4), last(3, 4), alone(0, 1);
  EXPECT_EQ(first.previous(), 3);
  EXPECT_EQ(first.next(), 1);
  EXPECT_EQ(last.next(), 0);
  EXPECT_EQ(alone.next(), 0);
  EXPECT_EQ(alone.previous(), 0);
  EXPECT_EQ(alone.steps(), 0);
}

class RingSimulation : public ::testing::TestWithParam<int> {};

TEST_P(RingSimulation, ReduceScatterLeavesEveryRankItsBlockComplete) {
  const int n = GetParam();
  // held[r][b]: the ranks whose contributions rank r's partial sum of block b holds.
  std::vector<std::vector<std::set<int>>> held(n, std::vector<std::set<int>>(n));
  for (int r = 0; r < n; ++r) {
    for (int b = 0; b < n; ++b) held[r][b] = {r};
  }
  for (int step = 0; step < n - 1; ++step) {
    auto before = held;
    for (int r = 0; r < n; ++r) {
      RingPattern me(r, n), sender(me.previous(), n);
      const int block = me.reduce_scatter_recv_block(step);
      // What arrives is what the previous rank sends at this step.
      ASSERT_EQ(sender.reduce_scatter_send_block(step), block);
      std::set<int> arrived = before[sender.rank()][block];
      // A rank sends at step s + 1 exactly the block it received at step s.
      if (step + 1 < n - 1) {
        ASSERT_EQ(me.reduce_scatter_send_block(step + 1), block);
      }
      for (int source : arrived) {
        ASSERT_EQ(held[r][block].count(source), 0u) << "contribution counted twice";
        held[r][block].insert(source);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(held[r][RingPattern(r, n).owned_block()].size(), static_cast<size_t>(n));
  }
}

TEST_P(RingSimulation, AllgatherDeliversEveryBlockOnce) {
  const int n = GetParam();
  std::vector<std::set<int>> have(n);
  for (int r = 0; r < n; ++r) have[r] = {RingPattern(r, n).owned_block()};
  for (int step = 0; step < n - 1; ++step) {
    auto before = have;
    for (int r = 0; r < n; ++r) {
      RingPattern me(r, n), sender(me.previous(), n);
      const int block = me.allgather_recv_block(step);
      ASSERT_EQ(sender.allgather_send_block(step), block);
      ASSERT_EQ(before[sender.rank()].count(block), 1u) << "sent a block it did not have";
      ASSERT_EQ(have[r].count(block), 0u) << "received a block twice";
      have[r].insert(block);
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(have[r].size(), static_cast<size_t>(n));
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingSimulation, ::testing::Values(1, 2, 3, 4, 5, 8, 13));

}  // namespace
}  // namespace terse
