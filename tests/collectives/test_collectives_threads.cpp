// Every collective, N ranks as threads over the real UCX transport (N in 1, 2, 3, 4, 8): every
// type, op, placement and algorithm at the small sizes (0, 1, 1001 elements) and a few MiB per
// collective (collective_case_lists.h: the lists the ranks as processes run too), and tiny
// pipeline pieces so that pipelining, scratch reuse and the wrap of the 12-bit step number all
// take part. What each output must equal and the per-type tolerances are stated in
// collective_case.h and reduction_reference.h: exact for data movement, integers, max/min and
// prod; n * u * sum|inputs| for float sums (u the type's unit roundoff, fp32 accumulation per
// step).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_case_lists.h"
#include "collective_cases.h"

namespace terse {
namespace {

using test::CollectiveCase;
using test::CommunicatorWorld;
using test::TestOp;
using K = CollectiveKind;

class CollectiveRanks : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveRanks, DataMovementEveryTypeSizeAndPlacement) {
  CommunicatorWorld world(GetParam());
  test::run_collective_cases(world, test::data_movement_cases(GetParam()));
}

TEST_P(CollectiveRanks, ReductionsEveryTypeOpAndPlacement) {
  CommunicatorWorld world(GetParam());
  test::run_collective_cases(world, test::reduction_cases(GetParam()));
}

// Allreduce through the communicator (its algorithms alone: test_allreduce_*.cpp).
TEST_P(CollectiveRanks, AllreduceEveryTypeOpAndPlacement) {
  CommunicatorWorld world(GetParam());
  test::run_collective_cases(world, test::allreduce_cases(GetParam()));
}

// A few MiB through the communicator's own choice (the chains for broadcast and reduce) and the
// other algorithms by name, with the default 1 MiB pieces.
TEST_P(CollectiveRanks, SeveralMiB) {
  CommunicatorWorld world(GetParam());
  test::run_collective_cases(world, test::several_mib_cases(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveRanks, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Pieces of 256 bytes: 1001-element blocks travel as 4 to 32 pieces, more than the windows
// and scratch slots hold, so their reuse and the waits for sends to free them all take part.
class SmallPieceRanks : public ::testing::TestWithParam<int> {};

TEST_P(SmallPieceRanks, EveryAlgorithmInManyPieces) {
  CommunicatorWorld world(GetParam(), {{"TERSE_PIECE_BYTES", "256"}});
  std::vector<CollectiveCase> cases;
  const int root = test::root_for(GetParam());
  for (const test::AlgorithmVariant& v : test::data_movement_variants()) {
    for (bool in_place : {false, true}) {
      cases.push_back({v.kind, v.algorithm, ncclFloat64, TestOp::kSum, 1001, in_place, root});
    }
  }
  for (const test::AlgorithmVariant& v : test::reducing_variants()) {
    for (TestOp op : {TestOp::kSum, TestOp::kPreMulSum, TestOp::kAvg}) {
      for (ncclDataType_t type : {ncclFloat32, ncclInt64, ncclBfloat16}) {
        cases.push_back({v.kind, v.algorithm, type, op, 1001, op == TestOp::kAvg, root});
      }
    }
  }
  test::run_collective_cases(world, cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SmallPieceRanks, ::testing::Values(2, 3, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// One-byte pieces: more than 4096 messages between two ranks in one call, so the 12-bit step
// number wraps inside the call; matching must still pair each message with its receive.
TEST(StepNumbers, WrapInsideOneCall) {
  CommunicatorWorld world(3, {{"TERSE_PIECE_BYTES", "1"}});
  const size_t count = 4096 + 1000;
  test::run_collective_cases(
      world, {{K::kAllGather, "ring", ncclUint8, TestOp::kSum, count / 2, false, 0},
              {K::kReduceScatter, "ring", ncclInt8, TestOp::kMax, count / 2, false, 0},
              {K::kBroadcast, "chain", ncclInt8, TestOp::kSum, count, false, 1},
              {K::kReduce, "chain", ncclUint8, TestOp::kMin, count, true, 2}});
}

}  // namespace
}  // namespace terse
