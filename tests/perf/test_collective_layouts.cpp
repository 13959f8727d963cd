// Each collective's buffer layout, and its expected output against a direct host simulation
// of what the collective does with every rank's input.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

TEST(PerfCollectiveLayouts, CountsFollowNcclTests) {
  // 1000 floats over 3 ranks: blocks of 333 rounded down to 16 bytes.
  CallCounts gather = all_gather_test().counts(1000, 4, 3);
  EXPECT_EQ(gather.param, 332u);
  EXPECT_EQ(gather.send, 332u);
  EXPECT_EQ(gather.recv, 996u);
  EXPECT_EQ(gather.send_in_place, 332u);
  CallCounts scatter = reduce_scatter_test().counts(1000, 4, 3);
  EXPECT_EQ(scatter.send, 996u);
  EXPECT_EQ(scatter.recv, 332u);
  EXPECT_EQ(scatter.recv_in_place, 332u);
  CallCounts alltoall = alltoall_test().counts(1000, 1, 3);  // int8: 16-element granules
  EXPECT_EQ(alltoall.param, 320u);
  EXPECT_EQ(alltoall.send, 960u);
  EXPECT_EQ(alltoall.recv, 960u);
  CallCounts reduce = all_reduce_test().counts(1000, 8, 3);
  EXPECT_EQ(reduce.send, 1000u);
  EXPECT_EQ(reduce.recv, 1000u);
  EXPECT_EQ(reduce.param, 1000u);
  EXPECT_EQ(all_gather_test().counts(2, 4, 3).param, 0u);  // too small: an empty call
}

// What rank `rank` holds after the collective, computed directly from the inputs.
using Simulation = std::function<double(const ValuePattern& pattern, int rank, int root,
                                        bool in_place, const CallCounts& counts, size_t index)>;

double sum_over_ranks(const ValuePattern& pattern, size_t index) {
  double sum = 0;
  for (int rank = 0; rank < pattern.nranks(); ++rank) sum += pattern.input(rank, index);
  return sum;
}

void expect_matches_simulation(const CollectiveTest& test, Reduction op,
                               const Simulation& simulate) {
  const DataTypeInfo& type = data_type_info(ncclInt32);
  for (int nranks : {1, 2, 3, 5}) {
    const ValuePattern pattern(type, op, nranks);
    const CallCounts counts = test.counts(1000, type.bytes, nranks);
    for (int root : {0, nranks - 1}) {
      for (bool in_place : {false, true}) {
        for (int rank = 0; rank < nranks; ++rank) {
          const CheckContext context{pattern, rank, nranks, root, in_place, counts};
          for (size_t i = 0; i < counts.recv; ++i) {
            ASSERT_EQ(test.expected(context, i).value,
                      simulate(pattern, rank, root, in_place, counts, i))
                << test.name << " nranks " << nranks << " rank " << rank << " root " << root
                << (in_place ? " in place" : "") << " element " << i;
          }
        }
      }
    }
  }
}

TEST(PerfCollectiveLayouts, ExpectedOutputsMatchASimulation) {
  expect_matches_simulation(all_reduce_test(), Reduction::kSum,
                            [](const ValuePattern& p, int, int, bool, const CallCounts&, size_t i) {
                              return sum_over_ranks(p, i);
                            });
  expect_matches_simulation(
      all_gather_test(), Reduction::kNone,
      [](const ValuePattern& p, int, int, bool, const CallCounts& c, size_t i) {
        return p.input(static_cast<int>(i / c.param), i % c.param);
      });
  expect_matches_simulation(reduce_scatter_test(), Reduction::kSum,
                            [](const ValuePattern& p, int rank, int, bool, const CallCounts& c,
                               size_t i) { return sum_over_ranks(p, rank * c.param + i); });
  expect_matches_simulation(broadcast_test(), Reduction::kNone,
                            [](const ValuePattern& p, int, int root, bool, const CallCounts&,
                               size_t i) { return p.input(root, i); });
  expect_matches_simulation(
      reduce_test(), Reduction::kSum,
      [](const ValuePattern& p, int rank, int root, bool in_place, const CallCounts&, size_t i) {
        if (rank == root) return sum_over_ranks(p, i);
        return in_place ? p.input(rank, i) : 0.0;  // untouched
      });
  expect_matches_simulation(
      alltoall_test(), Reduction::kNone,
      [](const ValuePattern& p, int rank, int, bool, const CallCounts& c, size_t i) {
        const int source = static_cast<int>(i / c.param);
        return p.input(source, rank * c.param + i % c.param);
      });
  expect_matches_simulation(
      sendrecv_test(), Reduction::kNone,
      [](const ValuePattern& p, int rank, int, bool, const CallCounts&, size_t i) {
        return p.input((rank + p.nranks() - 1) % p.nranks(), i);
      });
}

TEST(PerfCollectiveLayouts, HowEachUsesOpAndRoot) {
  EXPECT_EQ(all_reduce_test().op_use, OpUse::kReduces);
  EXPECT_EQ(reduce_scatter_test().op_use, OpUse::kReduces);
  EXPECT_EQ(reduce_test().op_use, OpUse::kReduces);
  EXPECT_EQ(all_gather_test().op_use, OpUse::kNone);
  EXPECT_EQ(broadcast_test().op_use, OpUse::kNone);
  EXPECT_EQ(alltoall_test().op_use, OpUse::kNone);
  EXPECT_EQ(sendrecv_test().op_use, OpUse::kNamedIgnored);
  EXPECT_TRUE(broadcast_test().uses_root);
  EXPECT_TRUE(reduce_test().uses_root);
  EXPECT_FALSE(all_reduce_test().uses_root);
  EXPECT_FALSE(sendrecv_test().checks_in_place);
  EXPECT_TRUE(alltoall_test().checks_in_place);
}

}  // namespace
}  // namespace perf
}  // namespace terse
