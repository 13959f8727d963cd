// The pieces shared by the low-bit quantizers (sign, terngrad, qsgd): the packed-code layout, the
// fixed summation order that CPU and GPU share, non-finite inputs, and GPU parity of all three.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "codec_test_support.h"
#include "codecs/bit_packing.h"
#include "codecs/block_stats.h"
#include "codecs/codec_registry.h"
#include "codecs/rounding_random.h"
#include "codecs/scaled_codes.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

// The layout of bit_packing.h written out plainly: full tiles transposed, the tail linear.
template <int kBits>
void expect_layout_matches_definition() {
  const size_t tile = 256 / kBits;
  for (size_t count : {tile * 3 + 5, tile * 2, size_t(3)}) {
    const size_t full = count / tile;
    for (size_t i = 0; i < count; ++i) {
      size_t byte;
      unsigned shift;
      packed_code_position<kBits>(count, i, &byte, &shift);
      size_t bit;  // absolute bit position in the code bytes
      if (i / tile < full) {
        const size_t e = i % tile, chunk = e / 8, lane = e % 8;
        bit = (i / tile) * 256 + lane * 32 + chunk * kBits;
      } else {
        bit = full * 256 + (i - full * tile) * kBits;
      }
      ASSERT_EQ(byte * 8 + shift, bit) << "bits " << kBits << " count " << count << " i " << i;
      ASSERT_LT(byte, packed_code_bytes(count, kBits));
    }
  }
}

TEST(BitPacking, PositionsFollowTheDocumentedLayout) {
  expect_layout_matches_definition<1>();
  expect_layout_matches_definition<2>();
  expect_layout_matches_definition<4>();
  expect_layout_matches_definition<8>();
}

TEST(BitPacking, SizesAndPadding) {
  EXPECT_EQ(packed_code_bytes(0, 1), 0u);
  EXPECT_EQ(packed_code_bytes(9, 1), 2u);
  EXPECT_EQ(packed_code_bytes(1001, 2), 251u);
  EXPECT_EQ(packed_code_bytes(1001, 4), 501u);
  EXPECT_EQ(packed_code_bytes(1001, 8), 1001u);
  EXPECT_EQ(packed_padding_mask(9, 1), 0xfeu);
  EXPECT_EQ(packed_padding_mask(16, 1), 0u);
  EXPECT_EQ(packed_padding_mask(1001, 2), 0xfcu);
  EXPECT_EQ(packed_padding_mask(1001, 4), 0xf0u);
  EXPECT_EQ(packed_padding_mask(1001, 8), 0u);
}

// The fixed order of block_stats.h written out as a plain scalar reference: element k to lane
// k % 32 in order, then the pairwise fold. The CPU code must match it bit for bit, since the GPU
// implements exactly this order with one warp.
TEST(BlockStats, SumsFollowTheFixedLaneOrder) {
  for (size_t n : {size_t(1), size_t(31), size_t(32), size_t(257), size_t(4096), size_t(65536)}) {
    auto values = random_normal(n, 40 + n);
    float abs_lanes[32] = {}, square_lanes[32] = {};
    float max_abs = 0;
    for (size_t k = 0; k < n; ++k) {
      abs_lanes[k % 32] += std::fabs(values[k]);
      square_lanes[k % 32] += values[k] * values[k];
      max_abs = std::max(max_abs, std::fabs(values[k]));
    }
    for (int width = 16; width >= 1; width /= 2) {
      for (int j = 0; j < width; ++j) {
        abs_lanes[j] += abs_lanes[j + width];
        square_lanes[j] += square_lanes[j + width];
      }
    }
    BlockStats stats =
        block_stats_cpu<F32, kStatMaxAbs | kStatAbsSum | kStatSquareSum>(values.data(), n);
    EXPECT_EQ(stats.abs_sum, abs_lanes[0]) << n;
    EXPECT_EQ(stats.square_sum, square_lanes[0]) << n;
    EXPECT_EQ(stats.max_abs, max_abs) << n;
  }
}

TEST(BlockStats, MaxIsNanStickyAndSeesInfinity) {
  std::vector<float> values = random_normal(100, 3);
  values[37] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(block_stats_cpu<F32, kStatMaxAbs>(values.data(), 100).max_abs));
  values[37] = -std::numeric_limits<float>::infinity();
  const float max_abs = block_stats_cpu<F32, kStatMaxAbs>(values.data(), 100).max_abs;
  EXPECT_EQ(max_abs, std::numeric_limits<float>::infinity());
}

// The draws of rounding_random.h are uniform on [0, 1) in 24-bit steps (16 bins of 2^20 draws:
// each count is within 6 sigma = 6 sqrt(2^16 * 15/16) of 2^16), and two seeds give uncorrelated
// streams (|corr| < 6 / sqrt(n)); the split (low, high) form equals the 64-bit form.
TEST(RoundingRandom, UniformAndIndependentAcrossSeeds) {
  const size_t n = 1 << 20;
  const RoundingKey a = rounding_key(1), b = rounding_key(2);
  std::vector<size_t> bins(16, 0);
  double sum_ab = 0, sum_a = 0, sum_b = 0, sum_aa = 0, sum_bb = 0;
  for (size_t i = 0; i < n; ++i) {
    const float u = rounding_uniform(a, uint64_t(i)), v = rounding_uniform(b, uint64_t(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));
    ++bins[static_cast<size_t>(u * 16)];
    sum_a += u;
    sum_b += v;
    sum_ab += double(u) * v;
    sum_aa += double(u) * u;
    sum_bb += double(v) * v;
  }
  const double sigma = std::sqrt(n / 16.0 * 15.0 / 16.0);
  for (size_t count : bins) EXPECT_NEAR(double(count), n / 16.0, 6 * sigma);
  const double cov = sum_ab / n - (sum_a / n) * (sum_b / n);
  const double corr = cov / std::sqrt((sum_aa / n - (sum_a / n) * (sum_a / n)) *
                                      (sum_bb / n - (sum_b / n) * (sum_b / n)));
  EXPECT_LT(std::fabs(corr), 6 / std::sqrt(double(n)));
  const uint64_t big = (uint64_t(3) << 32) + 12345;
  EXPECT_EQ(rounding_uniform(a, big), rounding_uniform(a, uint32_t(12345), uint32_t(3)));
  EXPECT_NE(rounding_uniform(a, big), rounding_uniform(a, uint64_t(12345)));
}

const char* const kSpecs[] = {
    "sign",
    "sign:block=8",
    "sign:block=1000",
    "terngrad",
    "terngrad:block=64,clip=2.5",
    "qsgd",
    "qsgd:levels=1",
    "qsgd:levels=3,norm=l2",
    "qsgd:levels=127,block=512",
    "qsgd:levels=20,block=40,norm=l2",
};

// A NaN or infinity in the input makes its block's scale non-finite; the decoder refuses such a
// message (naming the block) instead of spreading NaN into a reduction.
// Non-finite inputs are escaped before a quantizer sees them (test_nonfinite_escapes.cpp); a
// received non-finite block scale is refused.
TEST(ScaledCodes, DecoderRefusesANonFiniteBlockScale) {
  for (const char* spec : kSpecs) {
    SCOPED_TRACE(spec);
    auto codec = make(spec);
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      auto message =
          encode_host(*codec, to_dtype(random_normal(3000, 8), DType::kFloat32), DType::kFloat32);
      std::memcpy(message.data() + kWireHeaderBytes + 4, &bad, sizeof(bad));  // block 1's scale
      std::vector<float> output(3000);
      EXPECT_EQ(codec->decode(message.data(), message.size(), output.data(), 3000, DType::kFloat32,
                              false, DecodeContext{}),
                ncclInvalidArgument);
      EXPECT_NE(std::string(last_error()).find("scale of block"), std::string::npos)
          << last_error();
    }
  }
}

// Decoding follows the message, not the decoder's own parameters: a codec built with other
// parameters decodes the same values.
TEST(ScaledCodes, MessagesDescribeThemselves) {
  for (auto pair : {std::make_pair("sign:block=64", "sign"),
                    std::make_pair("terngrad:block=8,clip=1", "terngrad"),
                    std::make_pair("qsgd:levels=100,block=128,norm=l2", "qsgd:levels=1")}) {
    auto encoder = make(pair.first);
    auto other = make(pair.second);
    auto input = to_dtype(random_normal(999, 9), DType::kFloat32);
    EncodeContext context;
    context.seed = 5;
    auto message = encode_host(*encoder, input, DType::kFloat32, context);
    EXPECT_EQ(decode_host(*other, message, 999, DType::kFloat32),
              decode_host(*encoder, message, 999, DType::kFloat32))
        << pair.first;
  }
}

// Same bytes on the GPU as on the CPU: the scales (fixed-order sums), the codes (counter-based
// random numbers), the error output, and decoding with and without accumulation.
TEST(ScaledCodesGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(255), size_t(4099), size_t(100003)}) {
        SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count));
        auto input = to_dtype(random_normal(count, 6 + count), dtype);
        EncodeContext context;
        context.seed = 0x1234 + count;
        std::vector<float> host_error(count);
        EncodeContext host_context = context;
        host_context.error = host_error.data();
        auto host_message = encode_host(*codec, input, dtype, host_context);
        std::vector<uint8_t> device_message;
        std::vector<float> device_error;
        ASSERT_EQ(encode_device(*codec, input, dtype, context, &device_message, &device_error),
                  ncclSuccess)
            << last_error();
        ASSERT_EQ(device_message, host_message);
        EXPECT_EQ(device_error, host_error);
        std::vector<uint8_t> no_error_message;
        ASSERT_EQ(encode_device(*codec, input, dtype, context, &no_error_message), ncclSuccess);
        EXPECT_EQ(no_error_message, host_message);
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

// The device decoder validates too: a bad scale or a bad level is refused before anything is
// written.
TEST(ScaledCodesGpu, DeviceDecodeRefusesInvalidMessages) {
  TERSE_REQUIRE_GPU();
  for (const char* spec : {"sign", "terngrad", "qsgd:levels=5"}) {
    SCOPED_TRACE(spec);
    auto codec = make(spec);
    const size_t count = 1001;
    auto message =
        encode_host(*codec, to_dtype(random_normal(count, 3), DType::kFloat32), DType::kFloat32);
    std::vector<float> output;
    auto nan_scale = message;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    memcpy(nan_scale.data() + kWireHeaderBytes + 4, &nan, sizeof(nan));
    EXPECT_EQ(decode_device(*codec, nan_scale, count, DType::kFloat32, false, {}, &output),
              ncclInvalidArgument);
    auto padding = message;
    padding.back() |= 0x80;  // 1001 codes leave the top bit of the last byte unused
    EXPECT_EQ(decode_device(*codec, padding, count, DType::kFloat32, false, {}, &output),
              ncclInvalidArgument);
  }
  auto qsgd = make("qsgd:levels=5");
  auto message =
      encode_host(*qsgd, to_dtype(random_normal(64, 3), DType::kFloat32), DType::kFloat32);
  message.back() = 0x06;  // level 6 > 5
  std::vector<float> output;
  EXPECT_EQ(decode_device(*qsgd, message, 64, DType::kFloat32, false, {}, &output),
            ncclInvalidArgument);
}

}  // namespace
}  // namespace terse::testing
