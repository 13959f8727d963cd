// Recursive-doubling allreduce over the real UCX transport, ranks as threads: powers of two and
// the fold (3, 5 ranks), every type, op and placement; results bitwise identical on all ranks
// (run_allreduce_cases checks that for every case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce_test_support.h"
#include "collectives/allreduce_algorithms.h"
#include "common/result.h"

namespace terse {
namespace {

using test::AllreduceCase;
using test::TestOp;

class RecursiveDoublingRanks : public ::testing::TestWithParam<int> {};

TEST_P(RecursiveDoublingRanks, EveryTypeOpAndPlacementAtSmallSizes) {
  test::run_allreduce_cases(recursive_doubling_allreduce, GetParam(),
                            test::full_matrix({0, 1, 7, 1001}));
}

// Whole-buffer messages of 1 MiB (UCX's rendezvous protocol) and of 17 MiB (scratch beyond
// the per-thread retained buffer).
TEST_P(RecursiveDoublingRanks, LargeMessages) {
  const size_t mib = size_t{1} << 20;
  test::run_allreduce_cases(recursive_doubling_allreduce, GetParam(),
                            {AllreduceCase{ncclFloat16, TestOp::kPreMulSum, mib / 2 + 3, false},
                             AllreduceCase{ncclUint64, TestOp::kMax, 17 * mib / 8 + 1, true}});
}

// max and min are not commutative bit for bit: max(+0, -0) and max(x, NaN) depend on the order
// of the operands. Ranks hold a mix of +0, -0, NaN and 1; every rank must end with the same bits
// (each pair of partners must put the same operand on the left).
TEST_P(RecursiveDoublingRanks, OrderSensitiveOperandsGiveTheSameBitsEverywhere) {
  const int nranks = GetParam();
  constexpr size_t kCount = 257;
  const float values[] = {0.0f, -0.0f, std::nanf(""), -std::nanf(""), 1.0f};
  std::vector<std::vector<uint32_t>> results(nranks);
  for (ReduceKind kind : {ReduceKind::kMax, ReduceKind::kMin}) {
    test::run_with_transports(nranks, [&](Transport& transport) {
      const int rank = transport.rank();
      std::vector<float> data(kCount);
      for (size_t i = 0; i < kCount; ++i) data[i] = values[(i * 7 + rank * (i % 3 + 1)) % 5];
      CollectiveArgs args;
      args.send = data.data();
      args.recv = data.data();
      args.count = kCount;
      args.op.kind = kind;
      AlgorithmContext context{&transport, 1, transport.default_deadline()};
      ASSERT_EQ(recursive_doubling_allreduce(args, context), ncclSuccess) << last_error();
      results[rank].resize(kCount);
      std::memcpy(results[rank].data(), data.data(), kCount * sizeof(float));
    });
    for (int rank = 1; rank < nranks; ++rank) {
      EXPECT_EQ(results[rank], results[0]) << "rank " << rank << " differs from rank 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RecursiveDoublingRanks, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
}  // namespace terse
