// Random-K: exactly k stratified indices, shared-seed messages without indices, agreement of
// encoders that share a seed, unbiasedness over seeds, error output, refusals, GPU parity.
#include <gtest/gtest.h>

#include <cmath>

#include "sparse_test_support.h"

namespace terse::testing {
namespace {

std::vector<uint8_t> encode_with_seed(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                                      uint64_t seed, float* error = nullptr) {
  EncodeContext context;
  context.seed = seed;
  context.error = error;
  return encode_host(codec, input, dtype, context);
}

TEST(RandomK, KeepsExactlyKIndicesOnePerStratum) {
  auto codec = make_sparse("randomk:ratio=0.01,shared_seed=false");
  for (size_t count : {size_t(1), size_t(7), size_t(255), size_t(4099), size_t(100003)}) {
    SCOPED_TRACE(count);
    auto values = random_normal(count, count);
    auto message = encode_with_seed(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32, 5);
    SparseView view = view_sparse(message);
    const size_t k = std::max<size_t>(1, std::llround(0.01 * count));
    ASSERT_EQ(view.kept(), k);
    ASSERT_EQ(view.indices.size(), k);
    for (size_t j = 0; j < k; ++j) {
      ASSERT_GE(view.indices[j], j * count / k) << j;
      ASSERT_LT(view.indices[j], (j + 1) * count / k) << j;
      ASSERT_EQ(view.values[j], values[view.indices[j]]) << j;
    }
  }
}

// Shared seed: 32 + k * sizeof(element) bytes, no indices; the decoder draws them from the
// header's seed and decodes exactly what the explicit-index message decodes to.
TEST(RandomK, SharedSeedMessagesCarryNoIndicesAndDecodeTheSame) {
  auto shared = make_sparse("randomk:ratio=0.01");
  auto explicit_indices = make_sparse("randomk:ratio=0.01,shared_seed=false");
  const size_t count = 1 << 20, k = 10486;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto input = to_dtype(random_normal(count, 3), dtype);
    auto small = encode_with_seed(*shared, input, dtype, 77);
    auto large = encode_with_seed(*explicit_indices, input, dtype, 77);
    EXPECT_EQ(small.size(), kWireHeaderBytes + k * dtype_size(dtype));
    EXPECT_EQ(large.size(), kWireHeaderBytes + k * (4 + dtype_size(dtype)));
    if (dtype == DType::kFloat32) {
      EXPECT_LE(double(small.size()) / input.size(), 0.0101);
    }
    EXPECT_EQ(view_sparse(small).header.seed, 77u);
    EXPECT_EQ(decode_host(*shared, small, count, dtype), decode_host(*shared, large, count, dtype));
  }
}

TEST(RandomK, EncodersWithTheSameSeedPickTheSameIndices) {
  auto first = make_sparse("randomk:ratio=0.05,shared_seed=false");
  auto second = make_sparse("randomk:ratio=0.05,shared_seed=false");
  const size_t count = 10000;
  // Different data on two "ranks", same seed: same positions.
  auto a = encode_with_seed(*first, to_dtype(random_normal(count, 1), DType::kFloat32),
                            DType::kFloat32, 1234);
  auto b = encode_with_seed(*second, to_dtype(random_normal(count, 2), DType::kFloat32),
                            DType::kFloat32, 1234);
  EXPECT_EQ(view_sparse(a).indices, view_sparse(b).indices);
  auto c = encode_with_seed(*second, to_dtype(random_normal(count, 2), DType::kFloat32),
                            DType::kFloat32, 1235);
  size_t same = 0;
  auto ia = view_sparse(a).indices, ic = view_sparse(c).indices;
  for (size_t j = 0; j < ia.size(); ++j) same += ia[j] == ic[j];
  // Strata of 20: another seed matches a position with probability 1/20.
  EXPECT_LT(same, ia.size() / 5);
}

// Unbiasedness: element i sits in a stratum of length L (here 10) and decodes to L x_i with
// probability 1/L, else 0, so E = x_i and Var = (L - 1) x_i^2. The mean over S = 4000 seeds has
// standard deviation |x_i| sqrt((L - 1)/S) = 0.047 |x_i|; 5 of them per element leaves a chance
// of a false alarm among 1000 elements of about 1000 * 6e-7 under the normal approximation
// (400 expected selections per element make it a good one).
TEST(RandomK, IsUnbiasedOverSeeds) {
  const size_t count = 1000, seeds = 4000;
  const double length = 10;
  auto codec = make_sparse("randomk:ratio=0.1");
  auto values = random_normal(count, 21);
  auto input = to_dtype(values, DType::kFloat32);
  std::vector<double> sum(count, 0.0);
  std::vector<int> picked(count, 0);
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    auto decoded =
        decode_f32(*codec, encode_with_seed(*codec, input, DType::kFloat32, seed), count);
    for (size_t i = 0; i < count; ++i) {
      sum[i] += decoded[i];
      picked[i] += decoded[i] != 0.0f;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    double mean = sum[i] / seeds;
    double sigma = std::fabs(values[i]) * std::sqrt((length - 1) / seeds);
    ASSERT_NEAR(mean, values[i], 5 * sigma + 1e-12) << i;
    // Selections per element: Binomial(4000, 0.1), mean 400, sd 19.
    ASSERT_NEAR(picked[i], 400, 5 * 19) << i;
  }
}

TEST(RandomK, BiasedVariantSendsValuesUnscaled) {
  auto codec = make_sparse("randomk:ratio=0.1,unbiased=false,shared_seed=false");
  const size_t count = 997;
  auto values = random_normal(count, 22);
  auto message = encode_with_seed(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32, 3);
  SparseView view = view_sparse(message);
  auto decoded = decode_f32(*codec, message, count);
  std::vector<bool> kept(count, false);
  for (uint32_t index : view.indices) kept[index] = true;
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(decoded[i], kept[i] ? values[i] : 0.0f) << i;
}

TEST(RandomK, ErrorOutputIsInputMinusDecoded) {
  for (const char* spec : {"randomk:ratio=0.1", "randomk:ratio=0.1,shared_seed=false",
                           "randomk:ratio=0.1,unbiased=false"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype));
      const size_t count = 10007;
      auto input = to_dtype(random_normal(count, 4), dtype);
      std::vector<float> error(count);
      auto message = encode_with_seed(*codec, input, dtype, 9, error.data());
      auto decoded = decode_f32(*codec, message, count);
      auto exact = from_dtype(input, dtype);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], exact[i] - decoded[i]) << i;
    }
  }
}

TEST(RandomK, WarmupProgressRaisesTheDensity) {
  auto codec = make_sparse("randomk:ratio=0.01");
  const size_t count = 100000;
  auto input = to_dtype(random_normal(count, 5), DType::kFloat32);
  EncodeContext context;
  context.warmup_progress = 0.5;
  auto message = encode_host(*codec, input, DType::kFloat32, context);
  EXPECT_EQ(view_sparse(message).kept(), 10000u);
  EXPECT_EQ(message.size(), kWireHeaderBytes + 10000 * 4);
}

TEST(RandomK, DecoderRefusesIndicesOutsideTheirStratum) {
  auto codec = make_sparse("randomk:ratio=0.1,shared_seed=false");
  const size_t count = 100;
  auto valid = encode_with_seed(*codec, to_dtype(random_normal(count, 6), DType::kFloat32),
                                DType::kFloat32, 1);
  ASSERT_EQ(try_decode(*codec, valid, count), ncclSuccess);
  auto message = valid;
  put_index(&message, 2, 35);  // stratum 2 is [20, 30)
  EXPECT_EQ(try_decode(*codec, message, count), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("outside its stratum [20, 30)"), std::string::npos)
      << last_error();
  // Unknown flags and k > count.
  SparseView view = view_sparse(valid);
  WireHeader header = view.header;
  header.flags |= 0x80;
  message = valid;
  put_header(&message, header);
  EXPECT_EQ(try_decode(*codec, message, count), ncclInvalidArgument);
  header = view.header;
  header.param0 = count + 1;
  message = valid;
  put_header(&message, header);
  EXPECT_EQ(try_decode(*codec, message, count), ncclInvalidArgument);
}

TEST(RandomK, ParametersAreValidated) {
  expect_refused("randomk:ratio=0", "ratio=0");
  expect_refused("randomk:ratio=2", "ratio=2");
  expect_refused("randomk:shared_seed=maybe", "shared_seed=maybe");
  expect_refused("randomk:unbiased=2", "unbiased=2");
  expect_refused("randomk:k=5", "unknown parameter 'k'");
  EXPECT_EQ(make_sparse("randomk")->spec(), "randomk:ratio=0.01,shared_seed=true,unbiased=true");
  EXPECT_EQ(make_sparse("randomk:ratio=0.2,shared_seed=no,unbiased=off")->spec(),
            "randomk:ratio=0.2,shared_seed=false,unbiased=false");
}

TEST(RandomKGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (const char* spec :
       {"randomk", "randomk:shared_seed=false,ratio=0.3", "randomk:unbiased=false,ratio=0.5"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(4099), size_t(1 << 20)}) {
        SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count));
        auto input = to_dtype(random_normal(count, 6), dtype);
        std::vector<float> host_error(count);
        EncodeContext context;
        context.seed = 42;
        context.error = host_error.data();
        auto host_message = encode_host(*codec, input, dtype, context);
        std::vector<uint8_t> device_message;
        std::vector<float> device_error;
        context.error = nullptr;
        ASSERT_EQ(encode_device(*codec, input, dtype, context, &device_message, &device_error),
                  ncclSuccess)
            << last_error();
        EXPECT_EQ(device_message, host_message);
        EXPECT_EQ(device_error, host_error);
        for (bool accumulate : {false, true}) {
          auto initial = to_dtype(random_normal(count, 7), dtype);
          std::vector<float> device_output;
          ASSERT_EQ(decode_device(*codec, host_message, count, dtype, accumulate, initial,
                                  &device_output),
                    ncclSuccess)
              << last_error();
          auto host_output = initial;
          ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(),
                                  count, dtype, accumulate, DecodeContext{}),
                    ncclSuccess);
          EXPECT_EQ(device_output, from_dtype(host_output, dtype));
        }
      }
    }
  }
}

TEST(RandomKGpu, DeviceDecodeRefusesIndicesOutsideTheirStratum) {
  TERSE_REQUIRE_GPU();
  auto codec = make_sparse("randomk:ratio=0.1,shared_seed=false");
  const size_t count = 100;
  auto message = encode_with_seed(*codec, to_dtype(random_normal(count, 6), DType::kFloat32),
                                  DType::kFloat32, 1);
  put_index(&message, 2, 35);
  std::vector<float> output;
  EXPECT_EQ(decode_device(*codec, message, count, DType::kFloat32, false, {}, &output),
            ncclInvalidArgument);
}

}  // namespace
}  // namespace terse::testing
