// Non-finite gradients through every compressed algorithm with every codec it accepts, in fp32,
// fp16 and bf16, on 3 ranks (threads over UCX), as NCCL behaves: a NaN or Inf at element i of any
// rank's input gives a non-finite element i (of the kind NCCL's sum gives) in every rank's result
// and nothing else; every rank succeeds; the results equal the reference model's; no residual
// holds a non-finite value; and the next, all-finite step is as the model says and as accurate
// as in a run that never saw the poison.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;

constexpr int kRanks = 3;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  const char* algorithm;
  std::string codec;
  MemoryKind memory;
  size_t count;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char* algorithm : {"sra", "ring", "recursive_doubling", "tree", "hierarchical"}) {
    for (const std::string& codec : test::reencoding_codecs()) {
      // Unbiased Random-K re-encoded at every hop scales kept values by n/k each time: its
      // estimate of a sum leaves fp16's range within steps (an overflow, as a sum's would be).
      const bool unbiased_randomk = codec.rfind("randomk", 0) == 0;
      all.push_back({algorithm, unbiased_randomk ? codec + ",unbiased=false" : codec,
                     MemoryKind::kResidual, 4001});
    }
  }
  for (const char* codec : {"topk:ratio=0.05", "topk:ratio=0.6",
                            "randomk:ratio=0.05,shared_seed=false", "threshold:threshold=0.8"}) {
    all.push_back({"sparse_allgather", codec, MemoryKind::kResidual, 4001});
  }
  all.push_back({"sparse_allgather", "dgc:ratio=0.05", MemoryKind::kMomentum, 4001});
  all.push_back({"randomk", "randomk:ratio=0.05", MemoryKind::kNone, 4001});
  all.push_back({"randomk", "randomk:ratio=0.05,unbiased=false", MemoryKind::kResidual, 4001});
  all.push_back({"powersgd", "powersgd:rank=2", MemoryKind::kResidual, 64 * 64});
  return all;
}

// Rank r's input at a step; at step 1 rank 2 holds +Inf at 5, rank 0 NaN at 2000, rank 1 -Inf at
// the last element, and ranks 0 and 2 hold -Inf and +Inf at 3000 (their sum is NaN).
std::vector<std::vector<uint8_t>> inputs_of(size_t count, DType dtype, uint64_t step,
                                            bool poisoned) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> values = test::make_rank_input(r, count, 40 + step);
    if (poisoned) {
      if (r == 2) values[5] = kInf;
      if (r == 0) values[2000] = std::nanf("");
      if (r == 1) values[count - 1] = -kInf;
      if (r == 0) values[3000] = -kInf;
      if (r == 2) values[3000] = kInf;
    }
    inputs.push_back(test::to_dtype(values, dtype));
  }
  return inputs;
}

bool is_poisoned(size_t i, size_t count) {
  return i == 5 || i == 2000 || i == 3000 || i == count - 1;
}

// The largest |result - exact float64 sum| over the finite elements of rank 0.
double max_error(const std::vector<std::vector<uint8_t>>& inputs,
                 const std::vector<uint8_t>& output, DType dtype, size_t count) {
  double worst = 0;
  const std::vector<double> got = test::from_dtype(output, dtype, count);
  for (size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (const auto& input : inputs) exact += load_element(input.data(), dtype, i);
    if (std::isfinite(exact)) worst = std::max(worst, std::fabs(got[i] - exact));
  }
  return worst;
}

class NonFiniteResults : public ::testing::TestWithParam<DType> {};

TEST_P(NonFiniteResults, EveryAlgorithmAndCodecAsNcclWould) {
  const DType dtype = GetParam();
  CompressedRanks ranks(kRanks, "none", MemoryKind::kNone, {"a", "b", "a"});
  CompressedRanks clean(kRanks, "none", MemoryKind::kNone, {"a", "b", "a"});
  ASSERT_TRUE(ranks.ok() && clean.ok()) << ranks.error() << clean.error();
  ranks.set_piece_bytes(4096);
  clean.set_piece_bytes(4096);
  for (const Case& c : cases()) {
    const std::string label = std::string(c.algorithm) + " " + c.codec + " " + dtype_name(dtype);
    SCOPED_TRACE(label);
    ranks.use_codec(c.codec, c.memory);
    clean.use_codec(c.codec, c.memory);
    const CompressedAlgorithmInfo& algorithm = *find_compressed_algorithm(c.algorithm);
    std::vector<std::vector<uint8_t>> outputs, clean_outputs;
    for (uint64_t step = 0; step < 3; ++step) {
      const auto inputs = inputs_of(c.count, dtype, step, step == 1);
      std::vector<std::string> errors;
      const auto results =
          ranks.allreduce(algorithm, dtype, c.count, inputs, &outputs, 1.0, false, step, &errors);
      for (int r = 0; r < kRanks; ++r) ASSERT_EQ(results[r], ncclSuccess) << errors[r];
      const test::ModelCheck check = ranks.check_against_model(outputs);
      ASSERT_TRUE(check.ok()) << "step " << step << ": " << check.first;
      for (int r = 0; r < kRanks; ++r) {
        for (float v : ranks.residual(r, c.count, dtype)) ASSERT_TRUE(std::isfinite(v)) << r;
        const std::vector<double> got = test::from_dtype(outputs[r], dtype, c.count);
        for (size_t i = 0; i < c.count; ++i) {
          ASSERT_EQ(std::isfinite(got[i]), !(step == 1 && is_poisoned(i, c.count)))
              << "step " << step << " rank " << r << " element " << i << " = " << got[i];
        }
        if (step == 1) {
          EXPECT_EQ(got[5], kInf);
          EXPECT_TRUE(std::isnan(got[2000]));
          EXPECT_EQ(got[c.count - 1], -kInf);
          EXPECT_TRUE(std::isnan(got[3000]));
        }
      }
      // The same steps without the poison, for the accuracy of the step after.
      const auto clean_inputs = inputs_of(c.count, dtype, step, false);
      ASSERT_EQ(clean.allreduce(algorithm, dtype, c.count, clean_inputs, &clean_outputs, 1.0, false,
                                step),
                std::vector<ncclResult_t>(kRanks, ncclSuccess));
      if (step == 2) {
        const double after = max_error(inputs, outputs[0], dtype, c.count);
        const double never = max_error(clean_inputs, clean_outputs[0], dtype, c.count);
        EXPECT_LE(after, 1.5 * never + 1e-3) << "after the poison " << after << ", never " << never;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NonFiniteResults,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace terse
