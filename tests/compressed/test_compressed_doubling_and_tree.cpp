// Compressed recursive doubling and the compressed tree (compressed_recursive_doubling.cpp,
// compressed_tree.cpp) with every codec they accept on 1, 2, 3, 4, 5 and 8 ranks (5: a fold
// beyond the power of two). Stated bounds (compressed_error_bound.h): S_sum ((1 + c)^k - 1) with
// k = log2 n for doubling on a power of two, log2 p + 2 otherwise (p the power of two below n),
// and k = floor(log2 n) + 1 for the tree; every rank bitwise identical.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const std::vector<std::string>& accepted_codecs() {
  static const std::vector<std::string> codecs = {"none",
                                                  "fp16",
                                                  "bf16",
                                                  "int8",
                                                  "int4",
                                                  "int2",
                                                  "int8:mode=absmax,rounding=stochastic",
                                                  "qsgd",
                                                  "terngrad",
                                                  "sign",
                                                  "topk:ratio=0.1",
                                                  "randomk:ratio=0.1",
                                                  "threshold:threshold=0.5"};
  return codecs;
}

class DoublingAndTree : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(DoublingAndTree, EveryCodecWithinTheBound) {
  const CompressedAlgorithmInfo& algorithm = *find_compressed_algorithm(std::get<0>(GetParam()));
  for (const std::string& codec : accepted_codecs()) {
    CompressedRanks ranks(std::get<1>(GetParam()), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, algorithm, DType::kFloat32, count, count + 5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DoublingAndTree,
                         ::testing::Combine(::testing::Values("recursive_doubling", "tree"),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)));

TEST(DoublingAndTree, DtypesAverageAndInPlace) {
  for (const char* name : {"recursive_doubling", "tree"}) {
    CompressedRanks ranks(5, "int8", MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const CompressedAlgorithmInfo& algorithm = *find_compressed_algorithm(name);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, algorithm, dtype, 3001, 1);
      run_and_check(ranks, algorithm, dtype, 3001, 2, 0.2);
      run_and_check(ranks, algorithm, dtype, 3001, 3, 1.0, true);
    }
    run_and_check(ranks, algorithm, DType::kFloat32, 0, 4);
  }
}

TEST(DoublingAndTree, CompressedTrafficIsTheCodecsShare) {
  // Doubling on 4 ranks: 2 rounds of whole-buffer messages; int8 sends about 0.26 of fp32.
  const size_t count = 1 << 16;
  CompressedRanks ranks(4, "int8", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  run_and_check(ranks, *find_compressed_algorithm("recursive_doubling"), DType::kFloat32, count, 5);
  for (int r = 0; r < 4; ++r) {
    EXPECT_LT(double(ranks.counters(r).wire_bytes), 0.27 * 2 * count * 4) << r;
  }
}

}  // namespace
}  // namespace terse
