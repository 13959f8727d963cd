// Which allreduce runs by default, and that TERSE_ALGO's names reach both algorithms.
#include <gtest/gtest.h>

#include <string>

#include "collectives/algorithm_selection.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/allreduce_selection.h"

namespace terse {
namespace {

CollectiveArgs float_allreduce(size_t count) {
  CollectiveArgs args;
  args.kind = CollectiveKind::kAllReduce;
  args.type = ncclFloat32;
  args.count = count;
  return args;
}

// The boundary is on each rank's share: bytes / nranks, and it is 2 KiB (the figure the README's
// configuration table documents; written here, not read from the library's constant, so that a
// change of it fails here until the documentation follows).
constexpr size_t kDocumentedCrossoverBytesPerRank = 2048;

TEST(AllreduceSelection, RecursiveDoublingBelowTheCrossoverShareRingFromIt) {
  const AlgorithmSelection defaults;
  for (int nranks : {1, 2, 3, 4, 8, 64}) {
    const size_t crossover_bytes = kDocumentedCrossoverBytesPerRank * static_cast<size_t>(nranks);
    for (size_t bytes : {size_t{0}, size_t{8}, crossover_bytes - 4}) {
      EXPECT_EQ(defaults.choose(float_allreduce(bytes / 4), nranks)->run,
                &recursive_doubling_allreduce)
          << bytes << " bytes on " << nranks << " ranks";
    }
    for (size_t bytes : {crossover_bytes, size_t{64} << 20}) {
      EXPECT_EQ(defaults.choose(float_allreduce(bytes / 4), nranks)->run, &ring_allreduce)
          << bytes << " bytes on " << nranks << " ranks";
    }
  }
  // The same message changes algorithm with the rank count.
  EXPECT_EQ(defaults.choose(float_allreduce(2048), 2)->run, &ring_allreduce);
  EXPECT_EQ(defaults.choose(float_allreduce(2048), 8)->run, &recursive_doubling_allreduce);
}

TEST(AllreduceSelection, TerseAlgoNamesEitherAlgorithm) {
  AlgorithmSelection selection;
  ASSERT_EQ(AlgorithmSelection::parse("allreduce:recursive_doubling", &selection), ncclSuccess);
  CollectiveArgs big;
  big.kind = CollectiveKind::kAllReduce;
  big.type = ncclFloat64;
  big.count = size_t{16} << 20;
  EXPECT_EQ(selection.choose(big, 4)->run, &recursive_doubling_allreduce);
  ASSERT_EQ(AlgorithmSelection::parse("allreduce:ring", &selection), ncclSuccess);
  CollectiveArgs small = big;
  small.count = 1;
  EXPECT_EQ(selection.choose(small, 4)->run, &ring_allreduce);
  EXPECT_NE(algorithm_names().find("allreduce:recursive_doubling"), std::string::npos);
}

}  // namespace
}  // namespace terse
