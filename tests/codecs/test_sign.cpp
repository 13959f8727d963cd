// The sign codec: x^ = +-scale with the sign of x and scale = the block's mean |x|, its exact wire
// size and bit layout, error output, validation, and the error-feedback property it is used for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "codec_test_support.h"
#include "codecs/block_stats.h"
#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

float message_scale(const std::vector<uint8_t>& message, size_t block) {
  float scale;
  memcpy(&scale, message.data() + kWireHeaderBytes + 4 * block, sizeof(scale));
  return scale;
}

size_t sign_bytes(size_t count, size_t block) {
  return kWireHeaderBytes + 4 * ((count + block - 1) / block) + (count + 7) / 8;
}

// Decoded values are +-scale with x's sign (x >= 0 -> +), the scale is the block's mean |x|
// (bit-exact against the shared fixed-order sum, and within fp32 summation error of the exact
// mean: lanes of n/32 terms then a 5-level fold give a relative error <= (n/32 + 5) 2^-24, under
// 1e-6 for n = 256), for every input type and odd lengths.
TEST(SignCodec, DecodesToSignTimesBlockMeanAbs) {
  for (size_t block : {size_t(8), size_t(256), size_t(1000)}) {
    auto codec = make("sign:block=" + std::to_string(block));
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count :
           {size_t(1), size_t(7), size_t(255), size_t(256), size_t(257), size_t(4099)}) {
        SCOPED_TRACE(std::to_string(block) + " " + dtype_name(dtype) + " x " +
                     std::to_string(count));
        auto input = to_dtype(random_normal(count, count + block), dtype);
        auto values = from_dtype(input, dtype);  // what the input type holds
        auto message = encode_host(*codec, input, dtype);
        ASSERT_EQ(message.size(), sign_bytes(count, block));
        auto decoded = decode_host(*codec, message, count, DType::kFloat32);
        for (size_t start = 0; start < count; start += block) {
          const size_t n = std::min(block, count - start);
          const float scale = message_scale(message, start / block);
          const float shared =
              block_stats_cpu<F32, kStatAbsSum>(values.data() + start, n).abs_sum / float(n);
          ASSERT_EQ(scale, shared);
          double mean = 0;
          for (size_t i = start; i < start + n; ++i) mean += std::fabs(values[i]);
          mean /= n;
          ASSERT_NEAR(scale, mean, 1e-6 * mean * (1 + n / 256.0));
          for (size_t i = start; i < start + n; ++i) {
            ASSERT_EQ(decoded[i], values[i] < 0 ? -scale : scale) << i;
          }
        }
        // Decoding into the input type gives the fp32 values rounded to that type.
        auto typed = decode_host(*codec, message, count, dtype);
        EXPECT_EQ(typed, from_dtype(to_dtype(decoded, dtype), dtype));
      }
    }
  }
}

TEST(SignCodec, ZerosDecodeToPlusZeroScale) {
  auto codec = make("sign:block=8");
  std::vector<float> values = {0.0f,  -0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
                               -2.0f, 0.0f,  2.0f, 4.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto decoded =
      decode_host(*codec, encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32),
                  16, DType::kFloat32);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(decoded[i], 0.0f) << i;
  EXPECT_EQ(decoded[8], -1.0f);
  EXPECT_EQ(decoded[9], 1.0f);  // zero keeps the + side
  EXPECT_EQ(decoded[10], 1.0f);
}

// The bit of element i sits where bit_packing.h says: in a full tile of 256, element 8c + j is
// bit c of little-endian word j; after the last full tile, bits follow linearly.
TEST(SignCodec, BitLayoutOnTheWire) {
  auto codec = make("sign");
  const size_t count = 256 + 11;
  for (size_t negative : {size_t(0), size_t(9), size_t(255), size_t(256), size_t(266)}) {
    std::vector<float> values(count, 1.0f);
    values[negative] = -1.0f;
    auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
    const uint8_t* codes = message.data() + kWireHeaderBytes + 4 * 2;
    size_t bit = negative < 256 ? (negative % 8) * 32 + negative / 8 : 256 + (negative - 256);
    for (size_t b = 0; b < (count + 7) / 8 * 8; ++b) {
      ASSERT_EQ((codes[b / 8] >> (b % 8)) & 1, b == bit ? 1 : 0) << negative << " bit " << b;
    }
  }
}

// Wire size is exact: 32 + 4 ceil(n / block) + ceil(n / 8); at the default block on fp32 input
// the ratio is (1 / 8 + 4 / 256) / 4 = 0.03516, within the 0.04 required.
TEST(SignCodec, WireSizeAndRatio) {
  auto codec = make("sign");
  EXPECT_EQ(codec->spec(), "sign:block=256");
  for (size_t count : {size_t(0), size_t(1), size_t(9), size_t(1 << 20), size_t(1000003)}) {
    EXPECT_EQ(codec->max_encoded_bytes(count, DType::kFloat32),
              sign_bytes(count, 256) + escape_room(count))
        << count;
  }
  const size_t count = 1 << 20;
  auto message =
      encode_host(*codec, to_dtype(random_normal(count, 1), DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(message.size(), sign_bytes(count, 256));
  const double ratio = double(message.size()) / (4.0 * count);
  EXPECT_NEAR(ratio, 0.03515625, 1e-4);
  EXPECT_LE(ratio, 0.04);
}

TEST(SignCodec, ErrorOutputEqualsInputMinusDecoded) {
  auto codec = make("sign:block=64");
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const size_t count = 3001;
    auto input = to_dtype(random_normal(count, 12), dtype);
    auto values = from_dtype(input, dtype);
    std::vector<float> error(count);
    EncodeContext context;
    context.error = error.data();
    auto message = encode_host(*codec, input, dtype, context);
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
  }
}

// Error feedback. Each step compresses p_t = g + e_t and keeps e_{t+1} = p_t - C(p_t) (the
// encoder's error output), so sum_{t<T} C(p_t) = T g + e_0 - e_T = T g - e_T: the deviation from
// T g is the current residual, not an accumulation. Bound: per block of n elements the scaled sign
// with the mean scale leaves ||p - C(p)||^2 = (1 - delta) ||p||^2, delta = ||p||_1^2 / (n ||p||^2)
// in [1/n, 1]. With q = sqrt(1 - delta_min), delta_min over all blocks and steps,
// ||e_{t+1}|| <= q ||g + e_t|| <= q (||g|| + ||e_t||), so ||e_t|| <= q / (1 - q) ||g|| for every t:
// one constant for steps 50 and 100. (A constant g is the hard case for a sign codec: the residual
// must grow until a block's mean |p| reaches its largest |g_i|, p gets spiky and delta falls to
// about 0.1 here, so the bound is about 20 ||g||; run longer, ||e_t|| levels off near 19 ||g||.)
// Without error feedback the deviation is T ||g - C(g)||, growing with T; at T = 100 it is well
// above the bound, so the test tells the two apart.
TEST(SignCodec, ErrorFeedbackKeepsTheSumWithinAConstantOfTheTarget) {
  auto codec = make("sign");
  const size_t count = 1024;
  const std::vector<float> g = random_normal(count, 77);
  std::vector<float> residual(count, 0.0f), compensated(count), next_residual(count);
  std::vector<double> sum(count, 0.0);
  double g_norm = 0;
  for (float v : g) g_norm += double(v) * v;
  g_norm = std::sqrt(g_norm);
  double delta_min = 1.0;
  double deviation_at[101] = {};
  for (int step = 1; step <= 100; ++step) {
    for (size_t i = 0; i < count; ++i) compensated[i] = g[i] + residual[i];
    for (size_t start = 0; start < count; start += 256) {
      double l1 = 0, l2 = 0;
      for (size_t i = start; i < start + 256; ++i) {
        l1 += std::fabs(compensated[i]);
        l2 += double(compensated[i]) * compensated[i];
      }
      delta_min = std::min(delta_min, l1 * l1 / (256 * l2));
    }
    EncodeContext context;
    context.error = next_residual.data();
    auto message =
        encode_host(*codec, to_dtype(compensated, DType::kFloat32), DType::kFloat32, context);
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    double deviation = 0;
    for (size_t i = 0; i < count; ++i) {
      sum[i] += decoded[i];
      const double d = sum[i] - double(step) * g[i];
      deviation += d * d;
    }
    deviation_at[step] = std::sqrt(deviation);
    residual = next_residual;
    // The deviation is the residual (up to fp32 rounding of g + e_t over the steps).
    double residual_norm = 0;
    for (float v : residual) residual_norm += double(v) * v;
    ASSERT_NEAR(deviation_at[step], std::sqrt(residual_norm), 1e-4 * g_norm) << step;
  }
  ASSERT_GE(delta_min, 1.0 / 256 * (1 - 1e-6));  // Cauchy-Schwarz: ||p||_1^2 >= ||p||^2
  const double q = std::sqrt(1 - delta_min);
  const double bound = q / (1 - q) * g_norm * (1 + 1e-4);
  EXPECT_LE(deviation_at[50], bound);
  EXPECT_LE(deviation_at[100], bound);
  // The same 100 steps without error feedback drift by 100 ||g - C(g)||.
  auto plain =
      decode_host(*codec, encode_host(*codec, to_dtype(g, DType::kFloat32), DType::kFloat32), count,
                  DType::kFloat32);
  double drift = 0;
  for (size_t i = 0; i < count; ++i) drift += (double(plain[i]) - g[i]) * (plain[i] - g[i]);
  EXPECT_GT(100 * std::sqrt(drift), 2 * bound);
}

TEST(SignCodec, RefusesBadParameters) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec("sign:block=4", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block=4"), std::string::npos) << last_error();
  EXPECT_EQ(create_codec("sign:block=70000", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block=70000"), std::string::npos) << last_error();
  EXPECT_EQ(create_codec("sign:block=100", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block=100 is not a multiple of 8"), std::string::npos)
      << last_error();
  EXPECT_EQ(create_codec("sign:block=abc", &codec), ncclInvalidArgument);
  EXPECT_EQ(create_codec("sign:levels=3", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("unknown parameter 'levels'"), std::string::npos);
  EXPECT_EQ(create_codec("sign:block=65536", &codec), ncclSuccess);
  EXPECT_EQ(codec->spec(), "sign:block=65536");
}

class SignMessage : public ::testing::Test {
 protected:
  void SetUp() override {
    codec_ = make("sign:block=64");
    message_ =
        encode_host(*codec_, to_dtype(random_normal(kCount, 4), DType::kFloat32), DType::kFloat32);
  }
  ncclResult_t decode(const std::vector<uint8_t>& message) {
    output_.assign(kCount, 7.0f);
    return codec_->decode(message.data(), message.size(), output_.data(), kCount, DType::kFloat32,
                          false, DecodeContext{});
  }
  void set_header(const std::function<void(WireHeader*)>& edit, std::vector<uint8_t>* message) {
    WireHeader header;
    memcpy(&header, message->data(), sizeof(header));
    edit(&header);
    memcpy(message->data(), &header, sizeof(header));
  }
  static constexpr size_t kCount = 1001;
  std::unique_ptr<Codec> codec_;
  std::vector<uint8_t> message_;
  std::vector<float> output_;
};

TEST_F(SignMessage, RefusesNonFiniteOrNegativeScalesWithoutWriting) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f}) {
    auto message = message_;
    memcpy(message.data() + kWireHeaderBytes + 4 * 9, &bad, sizeof(bad));
    EXPECT_EQ(decode(message), ncclInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("scale of block 9"), std::string::npos)
        << last_error();
    for (float v : output_) ASSERT_EQ(v, 7.0f);
  }
}

TEST_F(SignMessage, RefusesNonzeroPaddingAndForeignHeaderFields) {
  auto padded = message_;
  padded.back() |= 0x02;  // 1001 bits: only bit 0 of the last byte is used
  EXPECT_EQ(decode(padded), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("padding"), std::string::npos) << last_error();
  auto block = message_;
  set_header([](WireHeader* h) { h->param0 = 12; }, &block);
  EXPECT_EQ(decode(block), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block=12"), std::string::npos) << last_error();
  // A different valid block changes the implied size, so the length check refuses it.
  set_header([](WireHeader* h) { h->param0 = 256; }, &block);
  EXPECT_EQ(decode(block), ncclInvalidArgument);
  auto param1 = message_;
  set_header([](WireHeader* h) { h->param1 = 1; }, &param1);
  EXPECT_EQ(decode(param1), ncclInvalidArgument);
  auto flags = message_;
  set_header([](WireHeader* h) { h->flags = 1; }, &flags);
  EXPECT_EQ(decode(flags), ncclInvalidArgument);
  EXPECT_EQ(decode(message_), ncclSuccess);
}

}  // namespace
}  // namespace terse::testing
