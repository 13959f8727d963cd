// Codec::encode_compensated (error feedback fused into the encode, docs/design.md section 3): for
// every codec, in every input dtype, the message and the residual it leaves must be bit for bit
// what the two steps give (v = input + residual in fp32, then encode(v) with the residual as the
// error output), on plain gradients, on heavy ties (top-k's sampled threshold overflows and it
// selects exactly from the residual), on inputs where fewer than k pass the sampled threshold, and
// with non-finite values in the input or produced by the addition itself (the escape path). Also
// which codecs answer fuses_compensation() and keeps_fraction().
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "codecs/topk_select.h"
#include "sparse_test_support.h"

namespace terse::testing {
namespace {

struct Step {
  std::vector<uint8_t> message;
  std::vector<float> residual;
};

// The two steps, written out: v = input + residual, encode(v) with error = residual.
Step two_steps(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
               std::vector<float> residual) {
  const size_t count = residual.size();
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = load_element(input.data(), dtype, i) + residual[i];
  }
  EncodeContext context;
  context.error = residual.data();
  Step step;
  step.message = encode_host(codec, to_dtype(values, DType::kFloat32), DType::kFloat32, context);
  step.residual = std::move(residual);
  return step;
}

Step fused(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
           std::vector<float> residual) {
  const size_t count = residual.size();
  Step step;
  step.message.resize(codec.max_encoded_bytes(count, DType::kFloat32));
  size_t bytes = 0;
  EXPECT_EQ(codec.encode_compensated(input.data(), dtype, residual.data(), count, EncodeContext{},
                                     step.message.data(), step.message.size(), &bytes),
            ncclSuccess)
      << last_error();
  step.message.resize(bytes);
  step.residual = std::move(residual);
  return step;
}

void expect_same(Codec& codec, const std::vector<float>& gradient,
                 const std::vector<float>& residual, const std::string& what) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(codec.spec() + " " + dtype_name(dtype) + " " + what + " x " +
                 std::to_string(gradient.size()));
    const std::vector<uint8_t> input = to_dtype(gradient, dtype);
    const Step expected = two_steps(codec, input, dtype, residual);
    const Step got = fused(codec, input, dtype, residual);
    EXPECT_EQ(got.message, expected.message);
    ASSERT_EQ(got.residual.size(), expected.residual.size());
    for (size_t i = 0; i < got.residual.size(); ++i) {
      ASSERT_EQ(float_bits(got.residual[i]), float_bits(expected.residual[i])) << i;
    }
  }
}

// Small integers with random signs: the k-th magnitude is shared by many elements.
std::vector<float> tied(size_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = static_cast<float>(random() % 4) * (random() % 2 ? 1 : -1);
  return values;
}

std::vector<float> scaled(std::vector<float> values, float scale) {
  for (float& value : values) value *= scale;
  return values;
}

const char* const kCodecs[] = {
    "topk", "topk:ratio=0.01",        "topk:method=exact,ratio=0.05", "topk:k=7", "topk:ratio=1",
    "int8", "threshold:threshold=0.5"};

TEST(CompensatedEncode, SameMessageAndResidualAsTheTwoSteps) {
  for (const char* spec : kCodecs) {
    auto codec = make_sparse(spec);
    for (size_t count : {size_t(0), size_t(1), size_t(17), size_t(4099), size_t(300007)}) {
      expect_same(*codec, random_normal(count, count + 1),
                  scaled(random_normal(count, count + 2), 0.3f), "normal");
      // Heavy ties: the sampled threshold lets through more than twice k, so the selection
      // goes exact over the residual.
      expect_same(*codec, tied(count, count), std::vector<float>(count, 0.0f), "tied");
    }
  }
}

TEST(CompensatedEncode, FewerThanKSurviveTheSampledThreshold) {
  // The sample elements of rank 1..rank made huge in v (as test_topk.cpp does with the input):
  // the threshold is the rank-th of them and only they pass, fewer than k.
  const size_t count = 1 << 18, k = 2621;
  const SamplePlan plan = plan_sample(count, k);
  ASSERT_FALSE(plan.exact);
  ASSERT_LT(plan.rank, k);
  std::vector<float> gradient = random_normal(count, 31);
  std::vector<float> residual = scaled(random_normal(count, 32), 0.1f);
  for (size_t j = 0; j < plan.rank; ++j) {
    gradient[stratum_pick(kSampleSeed, j, count, plan.samples)] = 100.0f + j;
  }
  auto codec = make_sparse("topk:ratio=0.01");
  expect_same(*codec, gradient, residual, "boosted sample");
  const Step got = fused(*codec, to_dtype(gradient, DType::kFloat32), DType::kFloat32, residual);
  EXPECT_EQ(view_sparse(got.message).kept(), plan.rank);
}

TEST(CompensatedEncode, NonFiniteValuesTakeTheEscapePath) {
  const size_t count = 70001;
  for (const char* spec : kCodecs) {
    auto codec = make_sparse(spec);
    std::vector<float> gradient = random_normal(count, 5);
    std::vector<float> residual = scaled(random_normal(count, 6), 0.5f);
    gradient[3] = NAN;
    gradient[count - 1] = -INFINITY;
    expect_same(*codec, gradient, residual, "non-finite input");
    // Finite input and residual whose sum overflows to infinity.
    gradient = random_normal(count, 7);
    gradient[100] = FLT_MAX;
    residual[100] = FLT_MAX;
    expect_same(*codec, gradient, residual, "overflowing sum");
  }
}

TEST(CompensatedEncode, OnlyTopKFusesAndOnlyARatioKeepsAFraction) {
  for (const char* spec : {"topk", "topk:method=exact", "topk:ratio=0.3"}) {
    auto codec = make_sparse(spec);
    EXPECT_TRUE(codec->fuses_compensation()) << spec;
    EXPECT_TRUE(codec->keeps_fraction()) << spec;
  }
  auto fixed = make_sparse("topk:k=10");
  EXPECT_TRUE(fixed->fuses_compensation());
  EXPECT_FALSE(fixed->keeps_fraction());
  for (const char* spec : {"none", "int8", "threshold", "randomk", "randomk:shared_seed=false",
                           "dgc", "powersgd", "sign"}) {
    auto codec = make_sparse(spec);
    EXPECT_FALSE(codec->fuses_compensation()) << spec;
    EXPECT_FALSE(codec->keeps_fraction()) << spec;
  }
}

TEST(CompensatedEncode, KeepingAFractionMeansEachPartKeepsItsShare) {
  // What keeps_fraction promises the sparse allgather: a part of c elements, encoded as a tensor
  // of its own, keeps round(ratio c) elements (at least 1), and its message is at most
  // wire_bytes(c).
  auto codec = make_sparse("topk:ratio=0.01");
  for (size_t count : {size_t(1), size_t(99), size_t(150), size_t(1 << 20)}) {
    auto input = to_dtype(random_normal(count, count), DType::kFloat32);
    auto message = encode_host(*codec, input, DType::kFloat32);
    const size_t wanted = std::max<size_t>(1, static_cast<size_t>(std::floor(0.01 * count + 0.5)));
    EXPECT_LE(view_sparse(message).kept(), wanted) << count;
    EXPECT_LE(message.size(), codec->wire_bytes(count, DType::kFloat32, MatrixShape{})) << count;
  }
}

}  // namespace
}  // namespace terse::testing
