// Ring allreduce over the real UCX transport, ranks as threads: every type, op and placement at
// small sizes (empty, one element, fewer elements than ranks, unaligned), and several MiB cut
// into many pipeline pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allreduce_test_support.h"
#include "collectives/allreduce_algorithms.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::AllreduceCase;
using test::TestOp;

class RingAllreduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(RingAllreduceRanks, EveryTypeOpAndPlacementAtSmallSizes) {
  test::run_allreduce_cases(ring_allreduce, GetParam(), test::full_matrix({0, 1, 7, 1001}));
}

// 8 MiB with the default pieces (several per block up to 4 ranks), and ~1 MiB in 64 KiB pieces
// (several to dozens per block, so the look-ahead, scratch reuse and the allgather's wait for
// the reduce-scatter's sends all take part). Counts are deliberately not multiples of anything.
TEST_P(RingAllreduceRanks, SeveralMiBInManyPieces) {
  test::run_allreduce_cases(
      ring_allreduce, GetParam(),
      {AllreduceCase{ncclFloat32, TestOp::kSum, (size_t{8} << 20) / 4 + 3, false}});
  const size_t mib = size_t{1} << 20;
  test::run_allreduce_cases(ring_allreduce, GetParam(),
                            {AllreduceCase{ncclBfloat16, TestOp::kAvg, mib / 2 + 1, true},
                             AllreduceCase{ncclInt32, TestOp::kAvg, mib / 4 + 5, false},
                             AllreduceCase{ncclFloat8e4m3, TestOp::kPreMulSum, mib + 7, true},
                             AllreduceCase{ncclFloat64, TestOp::kMax, mib / 8 + 1, true}},
                            size_t{64} << 10);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingAllreduceRanks, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Pieces of one element: every unit is a message, and there are more units (6 steps x 1024
// pieces, the most per block) than the 12-bit step field of the tag holds, so step numbers wrap
// (safe because a peer's messages arrive in the order sent).
TEST(RingAllreduce, OneElementPiecesWrapTheStepNumber) {
  test::run_allreduce_cases(ring_allreduce, 4,
                            {AllreduceCase{ncclInt8, TestOp::kSum, 4096, false},
                             AllreduceCase{ncclFloat16, TestOp::kMin, 3001, true}},
                            /*piece_bytes=*/1);
}

// Far more pieces than a block may have: they grow instead (bounded request slots).
TEST(RingAllreduce, PieceCountIsBounded) {
  test::run_allreduce_cases(ring_allreduce, 2,
                            {AllreduceCase{ncclFloat32, TestOp::kSum, (size_t{1} << 20) + 1, true}},
                            /*piece_bytes=*/4);
}

// TCP loopback instead of the default shared memory (UCX 1.13 reports peer failure only over
// transports that can detect it, and TERSE_UCX_ERROR_MODE=peer asks for that on every endpoint).
TEST(RingAllreduce, OverTcpLoopback) {
  test::ScopedEnv mode("TERSE_UCX_ERROR_MODE", "peer");
  test::run_allreduce_cases(
      ring_allreduce, 4,
      {AllreduceCase{ncclFloat32, TestOp::kSum, (size_t{1} << 20) / 4 + 5, false},
       AllreduceCase{ncclUint64, TestOp::kProd, 1001, true}},
      size_t{256} << 10);
}

}  // namespace
}  // namespace terse
