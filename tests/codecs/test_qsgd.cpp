// The qsgd codec: unbiased stochastic rounding to s levels of a per-block norm. Checks the stated
// bounds (unbiasedness, per-element variance, the paper's L2 variance bound, |x^| <= N, rounding
// to one of the two adjacent levels), exact wire sizes, error output, seeds and validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "codec_test_support.h"
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

size_t qsgd_bytes(size_t count, size_t block, int bits) {
  return kWireHeaderBytes + 4 * ((count + block - 1) / block) + (count * bits + 7) / 8;
}

std::vector<uint8_t> encode_seeded(Codec& codec, const std::vector<float>& values, uint64_t seed,
                                   float* error = nullptr) {
  EncodeContext context;
  context.seed = seed;
  context.error = error;
  return encode_host(codec, to_dtype(values, DType::kFloat32), DType::kFloat32, context);
}

struct Config {
  int levels;
  const char* norm;
};
const Config kConfigs[] = {{1, "max"}, {1, "l2"}, {3, "l2"}, {7, "max"}, {7, "l2"}, {100, "max"}};

std::string spec_of(const Config& c, size_t block = 256) {
  return "qsgd:levels=" + std::to_string(c.levels) + ",block=" + std::to_string(block) +
         ",norm=" + c.norm;
}

// Per element, with N the block's norm and step = N / s: the decoded value has x's sign (or is
// 0), |x^| <= N exactly, and x^ is one of the two levels around x, so |x^ - x| <= step.
TEST(QsgdCodec, DecodesToAnAdjacentLevelWithinTheNorm) {
  for (const Config& config : kConfigs) {
    for (size_t block : {size_t(8), size_t(256)}) {
      auto codec = make(spec_of(config, block));
      for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        for (size_t count : {size_t(1), size_t(7), size_t(255), size_t(257), size_t(4099)}) {
          SCOPED_TRACE(codec->spec() + " " + dtype_name(dtype) + " x " + std::to_string(count));
          auto input = to_dtype(random_normal(count, count + block), dtype);
          auto values = from_dtype(input, dtype);
          EncodeContext context;
          context.seed = count;
          auto message = encode_host(*codec, input, dtype, context);
          const int bits = config.levels == 1 ? 2 : config.levels <= 7 ? 4 : 8;
          ASSERT_EQ(message.size(), qsgd_bytes(count, block, bits));
          auto decoded = decode_host(*codec, message, count, DType::kFloat32);
          for (size_t i = 0; i < count; ++i) {
            const float norm = message_scale(message, i / block);
            const double step = double(norm) / config.levels;
            ASSERT_LE(std::fabs(decoded[i]), norm) << i;
            ASSERT_TRUE(decoded[i] == 0 || (decoded[i] < 0) == (values[i] < 0)) << i;
            ASSERT_LE(std::fabs(decoded[i] - values[i]), step * (1 + 1e-5)) << i;
          }
          auto typed = decode_host(*codec, message, count, dtype);
          EXPECT_EQ(typed, from_dtype(to_dtype(decoded, dtype), dtype));
        }
      }
    }
  }
}

TEST(QsgdCodec, NormIsMaxAbsOrL2AndTheMaxElementDecodesExactly) {
  std::vector<float> values = random_normal(256, 5);
  size_t argmax = 0;
  double l2 = 0;
  for (size_t i = 0; i < 256; ++i) {
    if (std::fabs(values[i]) > std::fabs(values[argmax])) argmax = i;
    l2 += double(values[i]) * values[i];
  }
  auto max_codec = make("qsgd");
  auto message = encode_seeded(*max_codec, values, 1);
  EXPECT_EQ(message_scale(message, 0), std::fabs(values[argmax]));
  // With the max norm, the largest element is exactly at level s: it decodes to +-N always.
  EXPECT_EQ(decode_host(*max_codec, message, 256, DType::kFloat32)[argmax], values[argmax]);
  auto l2_codec = make("qsgd:norm=l2");
  EXPECT_NEAR(message_scale(encode_seeded(*l2_codec, values, 1), 0), std::sqrt(l2),
              1e-6 * std::sqrt(l2));
}

// Unbiasedness and variance, over K = 4000 seeds. Rounding between levels step = N / s apart with
// P(up) = p makes Var[x^] = step^2 p (1 - p) <= step^2 / 4. By the central limit theorem the mean
// of K draws is within 6 sigma <= 6 (step / 2) / sqrt(K) = 0.047 step of x except with
// probability 2e-9 per element (plus 1e-6 N for fp32 rounding); rounding to nearest instead would
// miss by up to step / 2. The sample variance (1/K normalisation) of a variable on two points
// step apart is step^2 p^(1 - p^) <= step^2 / 4 exactly, which also shows x^ took two adjacent
// levels. For norm=l2 the block's mean squared error is checked against the paper's bound
// E||x^ - x||^2 <= min(d / s^2, sqrt(d) / s) ||x||^2 (QSGD, Lemma 3.1).
TEST(QsgdCodec, UnbiasedWithBoundedVariance) {
  const size_t count = 600, block = 256, kSeeds = 4000;
  for (const Config& config : kConfigs) {
    SCOPED_TRACE(spec_of(config));
    auto codec = make(spec_of(config));
    auto values = random_normal(count, 21);
    std::vector<double> sum(count, 0.0), square_sum(count, 0.0);
    std::vector<float> norms;
    for (uint64_t seed = 0; seed < kSeeds; ++seed) {
      auto message = encode_seeded(*codec, values, seed * 7919 + 1);
      if (seed == 0) {
        for (size_t b = 0; b < 3; ++b) norms.push_back(message_scale(message, b));
      }
      auto decoded = decode_host(*codec, message, count, DType::kFloat32);
      for (size_t i = 0; i < count; ++i) {
        sum[i] += decoded[i];
        square_sum[i] += double(decoded[i]) * decoded[i];
      }
    }
    std::vector<double> block_mse(3, 0.0), block_norm2(3, 0.0);
    for (size_t i = 0; i < count; ++i) {
      const double norm = norms[i / block];
      const double step = norm / config.levels;
      const double mean = sum[i] / kSeeds;
      const double variance = std::max(0.0, square_sum[i] / kSeeds - mean * mean);
      ASSERT_NEAR(mean, values[i], 6 * (step / 2) / std::sqrt(double(kSeeds)) + 1e-6 * norm) << i;
      ASSERT_LE(variance, step * step / 4 * (1 + 1e-6) + 1e-9 * norm * norm) << i;
      // E[(x^ - x)^2] estimated from the same draws.
      block_mse[i / block] +=
          square_sum[i] / kSeeds - 2 * values[i] * mean + double(values[i]) * values[i];
      block_norm2[i / block] += double(values[i]) * values[i];
    }
    if (std::string(config.norm) == "l2") {
      for (size_t b = 0; b < 3; ++b) {
        const double d = std::min(block, count - b * block), s = config.levels;
        EXPECT_LE(block_mse[b], std::min(d / (s * s), std::sqrt(d) / s) * block_norm2[b]) << b;
      }
    }
  }
}

TEST(QsgdCodec, SeedDrivesTheRoundingAndTravelsInTheHeader) {
  auto codec = make("qsgd");
  auto values = random_normal(1000, 3);
  auto a = encode_seeded(*codec, values, 42);
  EXPECT_EQ(encode_seeded(*codec, values, 42), a);
  EXPECT_NE(encode_seeded(*codec, values, 43), a);
  WireHeader header;
  memcpy(&header, a.data(), sizeof(header));
  EXPECT_EQ(header.seed, 42u);
  EXPECT_EQ(header.param0, 256u);
  EXPECT_EQ(header.param1, 7u);
  EXPECT_EQ(header.flags, 0u);
}

TEST(QsgdCodec, WireSizes) {
  EXPECT_EQ(make("qsgd")->spec(), "qsgd:block=256,levels=7,norm=max");
  struct Case {
    int levels, bits;
  };
  for (Case c : {Case{1, 2}, Case{2, 4}, Case{7, 4}, Case{8, 8}, Case{127, 8}}) {
    auto codec = make("qsgd:levels=" + std::to_string(c.levels));
    for (size_t count : {size_t(0), size_t(1), size_t(9), size_t(1 << 20), size_t(1000003)}) {
      EXPECT_EQ(codec->max_encoded_bytes(count, DType::kFloat32),
                qsgd_bytes(count, 256, c.bits) + escape_room(count))
          << c.levels << " " << count;
    }
  }
  const size_t count = 1 << 20;
  auto message = encode_seeded(*make("qsgd"), random_normal(count, 1), 1);
  EXPECT_EQ(message.size(), qsgd_bytes(count, 256, 4));
  EXPECT_NEAR(double(message.size()) / (4.0 * count), 0.12890625, 1e-4);
}

TEST(QsgdCodec, ErrorOutputEqualsInputMinusDecoded) {
  for (const Config& config : kConfigs) {
    auto codec = make(spec_of(config, 64));
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      const size_t count = 3001;
      auto input = to_dtype(random_normal(count, 12), dtype);
      auto values = from_dtype(input, dtype);
      std::vector<float> error(count);
      EncodeContext context;
      context.seed = 9;
      context.error = error.data();
      auto message = encode_host(*codec, input, dtype, context);
      auto decoded = decode_host(*codec, message, count, DType::kFloat32);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
    }
  }
}

TEST(QsgdCodec, AllZeroBlockEncodesZeros) {
  auto codec = make("qsgd:block=8,norm=l2");
  std::vector<float> values(16, 0.0f);
  values[12] = -3.0f;
  auto decoded = decode_host(*codec, encode_seeded(*codec, values, 1), 16, DType::kFloat32);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(decoded[i], 0.0f);
  EXPECT_EQ(decoded[12], -3.0f);  // alone in its block: |x| = ||x||_2, level s
}

TEST(QsgdCodec, RefusesBadParameters) {
  std::unique_ptr<Codec> codec;
  for (const char* spec : {"qsgd:levels=0", "qsgd:levels=128", "qsgd:block=4", "qsgd:block=12",
                           "qsgd:norm=l1", "qsgd:levels=x", "qsgd:bits=4"}) {
    EXPECT_EQ(create_codec(spec, &codec), ncclInvalidArgument) << spec;
    const std::string key = std::string(spec).substr(5, std::string(spec).find('=') - 5);
    EXPECT_NE(std::string(last_error()).find(key), std::string::npos) << spec << last_error();
  }
  EXPECT_EQ(create_codec("qsgd:levels=127,block=65536,norm=l2", &codec), ncclSuccess);
}

void edit_header(std::vector<uint8_t>* message, void (*edit)(WireHeader*)) {
  WireHeader header;
  memcpy(&header, message->data(), sizeof(header));
  edit(&header);
  memcpy(message->data(), &header, sizeof(header));
}

TEST(QsgdCodec, RefusesInvalidMessagesWithoutWriting) {
  auto codec = make("qsgd:levels=5,block=64");
  const size_t count = 1001;
  const auto message = encode_seeded(*codec, random_normal(count, 4), 3);
  std::vector<float> output;
  auto decode = [&](const std::vector<uint8_t>& bytes) {
    output.assign(count, 7.0f);
    return codec->decode(bytes.data(), bytes.size(), output.data(), count, DType::kFloat32, false,
                         DecodeContext{});
  };
  auto expect_refused = [&](const std::vector<uint8_t>& bytes, const char* why) {
    EXPECT_EQ(decode(bytes), ncclInvalidArgument) << why;
    EXPECT_NE(std::string(last_error()).find(why), std::string::npos) << last_error();
    for (float v : output) ASSERT_EQ(v, 7.0f) << why;
  };
  const size_t codes = kWireHeaderBytes + 4 * 16;
  auto level = message;
  level[codes + 100] = 0x60;  // level 6 > 5 in the high code of the byte
  expect_refused(level, "code byte 100");
  auto nan = message;
  const float bad = std::numeric_limits<float>::quiet_NaN();
  memcpy(nan.data() + kWireHeaderBytes + 4 * 3, &bad, sizeof(bad));
  expect_refused(nan, "scale of block 3");
  auto padding = message;
  padding.back() |= 0x10;  // 1001 4-bit codes use the low half of the last byte
  expect_refused(padding, "padding");
  auto levels0 = message;
  edit_header(&levels0, [](WireHeader* h) { h->param1 = 0; });
  expect_refused(levels0, "levels=0");
  auto levels128 = message;
  edit_header(&levels128, [](WireHeader* h) { h->param1 = 128; });
  expect_refused(levels128, "levels=128");
  auto flags = message;
  edit_header(&flags, [](WireHeader* h) { h->flags = 2; });
  expect_refused(flags, "norm flag 2");
  // levels=7 fills the 3-bit level field: every code is valid and the message decodes.
  auto seven = message;
  edit_header(&seven, [](WireHeader* h) { h->param1 = 7; });
  seven[codes + 100] = 0x70;
  EXPECT_EQ(decode(seven), ncclSuccess) << last_error();
  EXPECT_EQ(decode(message), ncclSuccess);
}

}  // namespace
}  // namespace terse::testing
