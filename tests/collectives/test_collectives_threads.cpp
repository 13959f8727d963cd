// Every collective except allreduce, N ranks as threads over the real UCX transport (N in 1, 2,
// 3, 4, 8): every type, op, placement and algorithm at the small sizes (0, 1, 1001 elements),
// a few MiB per collective, and tiny pipeline pieces so that pipelining, scratch reuse and the
// wrap of the 12-bit step number all take part. What each output must equal and the per-type
// tolerances are stated in collective_cases.h and allreduce_test_support.h: exact for data
// movement, integers, max/min and prod; n * u * sum|inputs| for float sums (u the type's unit
// roundoff, fp32 accumulation per step).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_cases.h"

namespace terse {
namespace {

using test::CollectiveCase;
using test::CommunicatorWorld;
using test::TestOp;
using K = CollectiveKind;

struct Variant {
  K kind;
  const char* algorithm;
};

// Every algorithm of the table outside allreduce, each by name.
const std::vector<Variant>& data_movement_variants() {
  static const std::vector<Variant> variants = {{K::kBroadcast, "tree"}, {K::kBroadcast, "chain"},
                                                {K::kAllGather, "ring"}, {K::kAllToAll, "pairwise"},
                                                {K::kGather, "direct"},  {K::kScatter, "direct"}};
  return variants;
}
const std::vector<Variant>& reducing_variants() {
  static const std::vector<Variant> variants = {
      {K::kReduce, "tree"}, {K::kReduce, "chain"}, {K::kReduceScatter, "ring"}};
  return variants;
}

// A root other than 0 where there is one, so that the relative numbering is exercised.
int root_for(int nranks) {
  return nranks > 1 ? nranks - 2 + (nranks == 2) : 0;
}

class CollectiveRanks : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveRanks, DataMovementEveryTypeSizeAndPlacement) {
  CommunicatorWorld world(GetParam());
  std::vector<CollectiveCase> cases;
  for (const Variant& v : data_movement_variants()) {
    for (ncclDataType_t type : test::all_types()) {
      for (size_t count : {0, 1, 1001}) {
        for (bool in_place : {false, true}) {
          cases.push_back(
              {v.kind, v.algorithm, type, TestOp::kSum, count, in_place, root_for(GetParam())});
        }
      }
    }
  }
  test::run_collective_cases(world, cases);
}

TEST_P(CollectiveRanks, ReductionsEveryTypeOpAndPlacement) {
  CommunicatorWorld world(GetParam());
  std::vector<CollectiveCase> cases;
  for (const Variant& v : reducing_variants()) {
    for (ncclDataType_t type : test::all_types()) {
      for (TestOp op : test::all_ops()) {
        for (bool in_place : {false, true}) {
          cases.push_back({v.kind, v.algorithm, type, op, 1001, in_place, root_for(GetParam())});
        }
      }
      // The edges: nothing, and a single element (fewer elements than ranks).
      for (size_t count : {0, 1}) {
        cases.push_back({v.kind, v.algorithm, type, TestOp::kAvg, count, count == 1, 0});
      }
    }
  }
  test::run_collective_cases(world, cases);
}

// A few MiB through the communicator's own choice (the chains for broadcast and reduce) and the
// other algorithms by name, with the default 1 MiB pieces.
TEST_P(CollectiveRanks, SeveralMiB) {
  const int n = GetParam();
  const size_t mib = size_t{1} << 20;
  CommunicatorWorld world(n);
  const int root = root_for(n);
  // Mostly 8-byte types: the test's own cost (inputs, references, checks) is per element.
  std::vector<CollectiveCase> cases = {
      {K::kBroadcast, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 + 5, false, root},
      {K::kBroadcast, "tree", ncclInt64, TestOp::kSum, 2 * mib / 8 + 1, true, root},
      {K::kReduce, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 + 5, false, root},
      {K::kReduce, "tree", ncclBfloat16, TestOp::kAvg, mib / 2 + 3, true, root},
      {K::kAllGather, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, false, 0},
      {K::kReduceScatter, nullptr, ncclFloat64, TestOp::kPreMulSum, 3 * mib / 8 / n + 1, true, 0},
      {K::kReduceScatter, nullptr, ncclInt32, TestOp::kMax, mib / 4 / n + 1, false, 0},
      {K::kAllToAll, nullptr, ncclUint64, TestOp::kSum, 3 * mib / 8 / n + 1, false, 0},
      {K::kAllToAll, nullptr, ncclUint32, TestOp::kSum, mib / 4 / n + 1, true, 0},
      {K::kGather, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, false, root},
      {K::kScatter, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, true, root},
  };
  test::run_collective_cases(world, cases);
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
  const int root = root_for(GetParam());
  for (const Variant& v : data_movement_variants()) {
    for (bool in_place : {false, true}) {
      cases.push_back({v.kind, v.algorithm, ncclFloat64, TestOp::kSum, 1001, in_place, root});
    }
  }
  for (const Variant& v : reducing_variants()) {
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
