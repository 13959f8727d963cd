// Threshold: keeps exactly the elements with |x| >= t, variable size bounded by
// max_encoded_bytes, error output, refusals, GPU parity.
#include <gtest/gtest.h>

#include <cmath>

#include "codecs/sparse_density.h"
#include "sparse_test_support.h"

namespace terse::testing {
namespace {

std::vector<uint32_t> at_least(const std::vector<float>& values, float threshold) {
  std::vector<uint32_t> indices;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::fabs(values[i]) >= threshold || std::isnan(values[i])) {
      indices.push_back(static_cast<uint32_t>(i));
    }
  }
  return indices;
}

// Stated bound: kept elements are exact, dropped ones are below t, so |x - decoded| < t.
TEST(Threshold, KeepsExactlyTheElementsAtOrAboveTheThreshold) {
  for (double threshold : {0.0, 0.001, 1.0, 2.5, 100.0}) {
    auto codec = make_sparse("threshold:threshold=" + spec_number(threshold));
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count :
           {size_t(0), size_t(1), size_t(7), size_t(255), size_t(4099), size_t(100003)}) {
        SCOPED_TRACE(std::to_string(threshold) + " " + dtype_name(dtype) + " x " +
                     std::to_string(count));
        auto raw = random_normal(count, count + 1);
        if (count > 5) {
          raw[1] = 1.0f;  // exactly at a threshold: kept
          raw[2] = std::nextafter(1.0f, 0.0f);
          raw[3] = -2.5f;
        }
        auto input = to_dtype(raw, dtype);
        auto values = from_dtype(input, dtype);
        auto message = encode_host(*codec, input, dtype);
        const float t = static_cast<float>(threshold);  // the codec compares in fp32
        auto expected = at_least(values, t);
        SparseView view = view_sparse(message);
        ASSERT_EQ(view.indices, expected);
        EXPECT_EQ(message.size(), kWireHeaderBytes + expected.size() * (4 + dtype_size(dtype)));
        EXPECT_LE(message.size(), codec->max_encoded_bytes(count, dtype));
        auto decoded = decode_f32(*codec, message, count);
        for (size_t i = 0; i < count; ++i) {
          if (std::fabs(values[i]) >= t) {
            ASSERT_EQ(decoded[i], values[i]) << i;
          } else {
            ASSERT_EQ(decoded[i], 0.0f) << i;
            ASSERT_LT(std::fabs(values[i] - decoded[i]), t) << i;
          }
        }
      }
    }
  }
}

TEST(Threshold, ZeroThresholdFillsTheWorstCaseExactly) {
  auto codec = make_sparse("threshold:threshold=0");
  const size_t count = 1001;
  auto input = to_dtype(random_normal(count, 2), DType::kBFloat16);
  auto message = encode_host(*codec, input, DType::kBFloat16);
  EXPECT_EQ(message.size() + escape_room(count), codec->max_encoded_bytes(count, DType::kBFloat16));
  EXPECT_EQ(message.size(), kWireHeaderBytes + count * 6);
}

// Non-finite elements are escaped beside the selection (codec.h), not selected: the threshold
// picks among the finite ones, and decoding restores them.
TEST(Threshold, NonFiniteElementsAreEscapedNotSelected) {
  auto codec = make_sparse("threshold:threshold=1.5");
  std::vector<float> values = {1.0f, NAN, -INFINITY, 2.0f, INFINITY};
  auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  auto decoded = decode_f32(*codec, message, values.size());
  EXPECT_EQ(decoded[0], 0.0f);
  EXPECT_TRUE(std::isnan(decoded[1]));
  EXPECT_EQ(decoded[2], -INFINITY);
  EXPECT_EQ(decoded[3], 2.0f);
  EXPECT_EQ(decoded[4], INFINITY);
}

TEST(Threshold, ErrorOutputIsInputMinusDecoded) {
  auto codec = make_sparse("threshold:threshold=1");
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const size_t count = 50001;
    auto input = to_dtype(random_normal(count, 3), dtype);
    std::vector<float> error(count);
    EncodeContext context;
    context.error = error.data();
    auto message = encode_host(*codec, input, dtype, context);
    auto decoded = decode_f32(*codec, message, count);
    auto exact = from_dtype(input, dtype);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], exact[i] - decoded[i]) << i;
  }
}

TEST(Threshold, NeedsTheWorstCaseCapacity) {
  auto codec = make_sparse("threshold:threshold=3");
  const size_t count = 1000;
  auto input = to_dtype(random_normal(count, 4), DType::kFloat32);
  std::vector<uint8_t> message(codec->max_encoded_bytes(count, DType::kFloat32) -
                               escape_room(count) - 1);
  size_t bytes = 0;
  EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, EncodeContext{}, message.data(),
                          message.size(), &bytes),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("capacity"), std::string::npos);
}

TEST(Threshold, ParametersAreValidated) {
  expect_refused("threshold:threshold=-1", "threshold=-1");
  expect_refused("threshold:threshold=big", "threshold=big");
  expect_refused("threshold:threshold=1e39", "threshold=1e+39");
  expect_refused("threshold:ratio=0.1", "unknown parameter 'ratio'");
  EXPECT_EQ(make_sparse("threshold")->spec(), "threshold:threshold=0.001");
  EXPECT_EQ(make_sparse("threshold:threshold=0.3")->spec(), "threshold:threshold=0.3");
}

TEST(ThresholdGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (const char* spec :
       {"threshold:threshold=0", "threshold:threshold=1.5", "threshold:threshold=100"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(0), size_t(1), size_t(4099), size_t(1 << 20)}) {
        SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count));
        auto input = to_dtype(random_normal(count, 6), dtype);
        std::vector<float> host_error(count);
        EncodeContext context;
        context.error = host_error.data();
        auto host_message = encode_host(*codec, input, dtype, context);
        std::vector<uint8_t> device_message;
        std::vector<float> device_error;
        ASSERT_EQ(
            encode_device(*codec, input, dtype, EncodeContext{}, &device_message, &device_error),
            ncclSuccess)
            << last_error();
        EXPECT_EQ(device_message, host_message);
        EXPECT_EQ(device_error, host_error);
        auto initial = to_dtype(random_normal(count, 7), dtype);
        std::vector<float> device_output;
        ASSERT_EQ(decode_device(*codec, host_message, count, dtype, true, initial, &device_output),
                  ncclSuccess)
            << last_error();
        auto host_output = initial;
        ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(), count,
                                dtype, true, DecodeContext{}),
                  ncclSuccess);
        EXPECT_EQ(device_output, from_dtype(host_output, dtype));
      }
    }
  }
}

}  // namespace
}  // namespace terse::testing
