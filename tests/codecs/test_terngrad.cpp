// The terngrad codec: x^ in {0, S sign(x)} with S the block's max |x|, unbiased with
// Var[x^] <= S |x|; optional clipping at clip * RMS; exact wire sizes, error output, validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

size_t terngrad_bytes(size_t count, size_t block) {
  return kWireHeaderBytes + 4 * ((count + block - 1) / block) + (count + 3) / 4;
}

std::vector<uint8_t> encode_seeded(Codec& codec, const std::vector<float>& values, uint64_t seed) {
  EncodeContext context;
  context.seed = seed;
  return encode_host(codec, to_dtype(values, DType::kFloat32), DType::kFloat32, context);
}

// Every decoded value is 0 or S with x's sign, S = the block's max |x| exactly.
TEST(TernGradCodec, DecodesToZeroOrTheSignedBlockMax) {
  for (size_t block : {size_t(8), size_t(256)}) {
    auto codec = make("terngrad:block=" + std::to_string(block));
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(7), size_t(255), size_t(257), size_t(4099)}) {
        SCOPED_TRACE(codec->spec() + " " + dtype_name(dtype) + " x " + std::to_string(count));
        auto input = to_dtype(random_normal(count, count + block), dtype);
        auto values = from_dtype(input, dtype);
        EncodeContext context;
        context.seed = count;
        auto message = encode_host(*codec, input, dtype, context);
        ASSERT_EQ(message.size(), terngrad_bytes(count, block));
        auto decoded = decode_host(*codec, message, count, DType::kFloat32);
        for (size_t start = 0; start < count; start += block) {
          const size_t n = std::min(block, count - start);
          float max_abs = 0;
          for (size_t i = start; i < start + n; ++i)
            max_abs = std::max(max_abs, std::fabs(values[i]));
          const float scale = message_scale(message, start / block);
          ASSERT_EQ(scale, max_abs);
          for (size_t i = start; i < start + n; ++i) {
            ASSERT_TRUE(decoded[i] == 0 || decoded[i] == (values[i] < 0 ? -scale : scale)) << i;
          }
        }
        auto typed = decode_host(*codec, message, count, dtype);
        EXPECT_EQ(typed, from_dtype(to_dtype(decoded, dtype), dtype));
      }
    }
  }
}

// Unbiasedness over K = 4000 seeds: x^ = S sign(x) b with b ~ Bernoulli(|x| / S), so
// Var[x^] = S |x| - x^2 <= S |x|. By the central limit theorem the mean of K draws is within
// 6 sqrt(S |x| / K) of x except with probability 2e-9 per element (plus 1e-6 S for fp32
// rounding of |x| / S). The stated variance bound is checked per block in sum:
// mean over draws of ||x^ - x||^2 <= S ||x||_1 (its expectation is S ||x||_1 - ||x||^2).
TEST(TernGradCodec, UnbiasedWithBoundedVariance) {
  const size_t count = 600, block = 256, kSeeds = 4000;
  auto codec = make("terngrad");
  auto values = random_normal(count, 31);
  std::vector<double> sum(count, 0.0), square_sum(count, 0.0);
  std::vector<float> scales;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    auto message = encode_seeded(*codec, values, seed * 104729 + 3);
    if (seed == 0) {
      for (size_t b = 0; b < 3; ++b) scales.push_back(message_scale(message, b));
    }
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    for (size_t i = 0; i < count; ++i) {
      sum[i] += decoded[i];
      square_sum[i] += double(decoded[i]) * decoded[i];
    }
  }
  std::vector<double> mse(3, 0.0), l1(3, 0.0);
  for (size_t i = 0; i < count; ++i) {
    const double scale = scales[i / block], x = values[i];
    const double mean = sum[i] / kSeeds;
    ASSERT_NEAR(mean, x, 6 * std::sqrt(scale * std::fabs(x) / kSeeds) + 1e-6 * scale) << i;
    mse[i / block] += square_sum[i] / kSeeds - 2 * x * mean + x * x;
    l1[i / block] += std::fabs(x);
  }
  for (size_t b = 0; b < 3; ++b) EXPECT_LE(mse[b], scales[b] * l1[b]) << b;
}

// With clip = c, S = min(max |x|, c * RMS), the RMS summed in the fixed order of block_stats.h;
// an outlier beyond S decodes to +-S (clipped, then level 1 with probability 1).
TEST(TernGradCodec, ClippingCapsTheScaleAtClipTimesRms) {
  auto codec = make("terngrad:clip=2.5");
  EXPECT_EQ(codec->spec(), "terngrad:block=256,clip=2.5");
  auto values = random_normal(512, 8);
  values[100] = 40.0f;  // an outlier in block 0
  auto message = encode_seeded(*codec, values, 5);
  for (size_t b = 0; b < 2; ++b) {
    const float* x = values.data() + 256 * b;
    BlockStats stats = block_stats_cpu<F32, kStatMaxAbs | kStatSquareSum>(x, 256);
    const float limit = 2.5f * std::sqrt(stats.square_sum / 256.0f);
    EXPECT_EQ(message_scale(message, b), std::min(stats.max_abs, limit)) << b;
  }
  EXPECT_LT(message_scale(message, 0), 10.0f);  // 2.5 RMS, the RMS raised by the outlier itself
  auto decoded = decode_host(*codec, message, 512, DType::kFloat32);
  EXPECT_EQ(decoded[100], message_scale(message, 0));
  // Unclipped, the outlier sets the scale.
  EXPECT_EQ(message_scale(encode_seeded(*make("terngrad"), values, 5), 0), 40.0f);
}

TEST(TernGradCodec, WireSizeAndErrorOutput) {
  auto codec = make("terngrad:block=64");
  for (size_t count : {size_t(0), size_t(1), size_t(9), size_t(1000003)}) {
    EXPECT_EQ(codec->max_encoded_bytes(count, DType::kFloat16),
              terngrad_bytes(count, 64) + escape_room(count));
  }
  EXPECT_NEAR(double(terngrad_bytes(1 << 20, 256)) / (4 << 20), 0.06640625, 1e-4);
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    const size_t count = 3001;
    auto input = to_dtype(random_normal(count, 12), dtype);
    auto values = from_dtype(input, dtype);
    std::vector<float> error(count);
    EncodeContext context;
    context.seed = 4;
    context.error = error.data();
    auto message = encode_host(*codec, input, dtype, context);
    EXPECT_EQ(message.size(), terngrad_bytes(count, 64));
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
  }
}

TEST(TernGradCodec, RefusesBadParameters) {
  std::unique_ptr<Codec> codec;
  for (const char* spec : {"terngrad:clip=-1", "terngrad:clip=101", "terngrad:clip=abc",
                           "terngrad:block=0", "terngrad:block=20", "terngrad:levels=2"}) {
    EXPECT_EQ(create_codec(spec, &codec), ncclInvalidArgument) << spec;
    const std::string key = std::string(spec).substr(9, std::string(spec).find('=') - 9);
    EXPECT_NE(std::string(last_error()).find(key), std::string::npos) << spec << last_error();
  }
}

TEST(TernGradCodec, RefusesInvalidMessagesWithoutWriting) {
  auto codec = make("terngrad:block=64");
  const size_t count = 1001;
  const auto message = encode_seeded(*codec, random_normal(count, 4), 3);
  std::vector<float> output;
  auto expect_refused = [&](const std::vector<uint8_t>& bytes, const char* why) {
    output.assign(count, 7.0f);
    EXPECT_EQ(codec->decode(bytes.data(), bytes.size(), output.data(), count, DType::kFloat32,
                            false, DecodeContext{}),
              ncclInvalidArgument)
        << why;
    EXPECT_NE(std::string(last_error()).find(why), std::string::npos) << last_error();
    for (float v : output) ASSERT_EQ(v, 7.0f) << why;
  };
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(), -0.5f}) {
    auto scale = message;
    memcpy(scale.data() + kWireHeaderBytes + 4 * 15, &bad, sizeof(bad));
    expect_refused(scale, "scale of block 15");
  }
  auto padding = message;
  padding.back() |= 0x04;  // 1001 2-bit codes use the low 2 bits of the last byte
  expect_refused(padding, "padding");
  auto param1 = message;
  param1[kWireHeaderBytes - 12] = 1;  // param1's low byte
  expect_refused(param1, "param1=1");
}

}  // namespace
}  // namespace terse::testing
