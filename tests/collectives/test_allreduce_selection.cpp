// Which allreduce runs by default, and that TERSE_ALGO's names reach both algorithms.
#include <gtest/gtest.h>

#include <string>

#include "collectives/algorithm_selection.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/allreduce_selection.h"

namespace terse {
namespace {

TEST(AllreduceSelection, RecursiveDoublingBelowTheCrossoverRingFromIt) {
  for (int nranks : {1, 2, 3, 4, 8, 64}) {
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{64} << 10, kRingAllreduceMinBytes - 1}) {
      ASSERT_NE(select_allreduce(bytes, nranks), nullptr);
      EXPECT_EQ(select_allreduce(bytes, nranks)->run, &recursive_doubling_allreduce) << bytes;
    }
    for (size_t bytes : {kRingAllreduceMinBytes, size_t{64} << 20, SIZE_MAX - 1}) {
      ASSERT_NE(select_allreduce(bytes, nranks), nullptr);
      EXPECT_EQ(select_allreduce(bytes, nranks)->run, &ring_allreduce) << bytes;
    }
  }
}

TEST(AllreduceSelection, AgreesWithTheCommunicatorsDefaultChoice) {
  const AlgorithmSelection defaults;
  for (size_t count : {size_t{1}, kRingAllreduceMinBytes / 4 - 1, kRingAllreduceMinBytes / 4}) {
    CollectiveArgs args;
    args.kind = CollectiveKind::kAllReduce;
    args.type = ncclFloat32;
    args.count = count;
    EXPECT_EQ(defaults.choose(args), select_allreduce(count * 4, 4)) << count;
  }
}

TEST(AllreduceSelection, TerseAlgoNamesEitherAlgorithm) {
  AlgorithmSelection selection;
  ASSERT_EQ(AlgorithmSelection::parse("allreduce:recursive_doubling", &selection), ncclSuccess);
  CollectiveArgs big;
  big.kind = CollectiveKind::kAllReduce;
  big.type = ncclFloat64;
  big.count = size_t{16} << 20;
  EXPECT_EQ(selection.choose(big)->run, &recursive_doubling_allreduce);
  ASSERT_EQ(AlgorithmSelection::parse("allreduce:ring", &selection), ncclSuccess);
  CollectiveArgs small = big;
  small.count = 1;
  EXPECT_EQ(selection.choose(small)->run, &ring_allreduce);
  EXPECT_NE(algorithm_names().find("allreduce:recursive_doubling"), std::string::npos);
}

}  // namespace
}  // namespace terse
