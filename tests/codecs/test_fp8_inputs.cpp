// fp8 tensors (NCCL 2.28's ncclFloat8e4m3 and ncclFloat8e5m2) through every codec: every code
// loads as the OCP specification's value (NaN and infinity included), fp32 stores round to
// nearest even and saturate finite values, and every registered codec computes in fp32: what it
// decodes from an fp8 tensor is what it decodes from the same values given as fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/dtype.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

// The specification's value of a code: sign * 2^(E - bias) * 1.M, or 0.M * 2^(1 - bias) for
// E = 0; E4M3's S.1111.111 is NaN (no infinity), E5M2's exponent 11111 is infinity (M = 0) or
// NaN.
double spec_value(uint32_t code, bool e5m2) {
  const int mantissa_bits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const uint32_t mantissa = code & ((1u << mantissa_bits) - 1);
  const uint32_t exponent = (code >> mantissa_bits) & (e5m2 ? 0x1fu : 0xfu);
  const double sign = (code & 0x80u) ? -1.0 : 1.0;
  if (!e5m2 && (code & 0x7fu) == 0x7fu) return NAN;
  if (e5m2 && exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  const double fraction = std::ldexp(double(mantissa), -mantissa_bits);
  if (exponent == 0) return sign * std::ldexp(fraction, 1 - bias);
  return sign * std::ldexp(1.0 + fraction, int(exponent) - bias);
}

const DType kFp8Types[] = {DType::kFloat8E4M3, DType::kFloat8E5M2};

bool is_e5m2(DType dtype) {
  return dtype == DType::kFloat8E5M2;
}

TEST(Fp8Elements, EveryCodeLoadsAsTheSpecificationsValue) {
  for (DType dtype : kFp8Types) {
    EXPECT_EQ(dtype_size(dtype), 1u);
    for (uint32_t code = 0; code < 256; ++code) {
      const uint8_t byte = uint8_t(code);
      const double expected = spec_value(code, is_e5m2(dtype));
      const float got = load_element(&byte, dtype, 0);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << dtype_name(dtype) << " " << code;
      } else {
        EXPECT_EQ(double(got), expected) << dtype_name(dtype) << " " << code;
      }
    }
  }
  const uint8_t max_e4m3 = 0x7e, max_e5m2 = 0x7b;
  EXPECT_EQ(load_element(&max_e4m3, DType::kFloat8E4M3, 0), 448.0f);
  EXPECT_EQ(load_element(&max_e5m2, DType::kFloat8E5M2, 0), 57344.0f);
}

// Stores: each value back to its own code; the midpoint of two neighbours to the one with the
// even code; a quarter of the way to the nearer; beyond the max normal to the max normal; NaN to
// NaN; infinity to infinity (E5M2) or NaN (E4M3, which has none).
TEST(Fp8Elements, StoresRoundToNearestEvenAndSaturate) {
  for (DType dtype : kFp8Types) {
    const bool e5m2 = is_e5m2(dtype);
    const uint32_t max_code = e5m2 ? 0x7b : 0x7e;
    for (uint32_t code = 0; code <= max_code; ++code) {
      for (double sign : {1.0, -1.0}) {
        const uint32_t signed_code = code | (sign < 0 ? 0x80u : 0u);
        uint8_t byte = 0;
        store_element(&byte, dtype, 0, float(spec_value(signed_code, e5m2)));
        EXPECT_EQ(byte, signed_code) << dtype_name(dtype);
        if (code == max_code) continue;
        const double lo = spec_value(code, e5m2), hi = spec_value(code + 1, e5m2);
        store_element(&byte, dtype, 0, float(sign * (lo + (hi - lo) / 2)));
        EXPECT_EQ(byte & 0x7fu, code % 2 == 0 ? code : code + 1) << dtype_name(dtype) << code;
        store_element(&byte, dtype, 0, float(sign * (lo + (hi - lo) / 4)));
        EXPECT_EQ(byte & 0x7fu, code) << dtype_name(dtype) << code;
        store_element(&byte, dtype, 0, float(sign * (lo + 3 * (hi - lo) / 4)));
        EXPECT_EQ(byte & 0x7fu, code + 1) << dtype_name(dtype) << code;
      }
    }
    uint8_t byte = 0;
    store_element(&byte, dtype, 0, 1e30f);
    EXPECT_EQ(byte, max_code);
    store_element(&byte, dtype, 0, -1e30f);
    EXPECT_EQ(byte, max_code | 0x80u);
    store_element(&byte, dtype, 0, NAN);
    EXPECT_TRUE(std::isnan(load_element(&byte, dtype, 0)));
    store_element(&byte, dtype, 0, -INFINITY);
    if (e5m2) {
      EXPECT_EQ(load_element(&byte, dtype, 0), -INFINITY);
    } else {
      EXPECT_TRUE(std::isnan(load_element(&byte, dtype, 0)));
    }
  }
}

// Values an fp8 tensor can hold (random normals rounded to it, some exact zeros and extremes).
std::vector<uint8_t> fp8_tensor(size_t count, DType dtype, uint64_t seed) {
  std::vector<float> values = random_normal(count, seed);
  for (size_t i = 0; i < count; i += 97) values[i] = 0.0f;
  if (count > 5) values[5] = is_e5m2(dtype) ? 57344.0f : -448.0f;
  return to_dtype(values, dtype);
}

class Fp8EveryCodec : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> codec_names() {
  std::vector<std::string> names;
  for (const CodecInfo& info : codec_table()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Registry, Fp8EveryCodec, ::testing::ValuesIn(codec_names()));

// The decode of an fp8 tensor's message equals the decode of the same values' fp32 message, bit
// for bit (the codec computed in fp32); and decoding into fp8 stores that result rounded once.
TEST_P(Fp8EveryCodec, ComputesInFp32) {
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec(GetParam(), &codec), ncclSuccess) << last_error();
  for (DType dtype : kFp8Types) {
    for (size_t count : {size_t(1), size_t(300), size_t(4099)}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(count));
      const auto fp8 = fp8_tensor(count, dtype, 40 + count);
      const auto fp32 = to_dtype(from_dtype(fp8, dtype), DType::kFloat32);
      const auto encode = [&](const std::vector<uint8_t>& input, DType type) {
        auto state = codec->make_state(count, type, MatrixShape{});
        EncodeContext context;
        context.seed = 7;
        context.state = state.get();
        return encode_host(*codec, input, type, context);
      };
      const auto from_fp8 = decode_host(*codec, encode(fp8, dtype), count, DType::kFloat32);
      auto from_fp32 = decode_host(*codec, encode(fp32, DType::kFloat32), count, DType::kFloat32);
      // PowerSGD sends a tensor dense (exactly) when its factors are not smaller than the tensor
      // in its own type, which happens to an fp8 tensor at sizes where fp32 goes low-rank.
      if (codec->id() == CodecId::kPowerSgd &&
          codec->wire_bytes(count, dtype, MatrixShape{}) == kWireHeaderBytes + count) {
        from_fp32 = from_dtype(fp32, DType::kFloat32);
      }
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(std::memcmp(&from_fp8[i], &from_fp32[i], 4), 0)
            << i << ": " << from_fp8[i] << " vs " << from_fp32[i];
      }
      const auto message = encode(fp8, dtype);
      std::vector<uint8_t> out(count);
      ASSERT_EQ(codec->decode(message.data(), message.size(), out.data(), count, dtype, false,
                              DecodeContext{}),
                ncclSuccess)
          << last_error();
      for (size_t i = 0; i < count; ++i) {
        uint8_t expected = 0;
        store_element(&expected, dtype, 0, from_fp8[i]);
        ASSERT_EQ(out[i], expected) << i << ": " << from_fp8[i];
      }
    }
  }
}

// NaN (and E5M2's infinities) in an fp8 tensor come back exactly where they were.
TEST_P(Fp8EveryCodec, NonFiniteFp8ElementsAreCarried) {
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec(GetParam(), &codec), ncclSuccess) << last_error();
  for (DType dtype : kFp8Types) {
    auto input = fp8_tensor(200, dtype, 3);
    input[10] = 0x7f;                      // NaN in both formats
    if (is_e5m2(dtype)) input[20] = 0xfc;  // -Inf
    auto state = codec->make_state(200, dtype, MatrixShape{});
    EncodeContext context;
    context.state = state.get();
    const auto decoded =
        decode_host(*codec, encode_host(*codec, input, dtype, context), 200, DType::kFloat32);
    EXPECT_TRUE(std::isnan(decoded[10])) << dtype_name(dtype);
    if (is_e5m2(dtype)) {
      EXPECT_EQ(decoded[20], -INFINITY);
    }
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (i != 10 && !(is_e5m2(dtype) && i == 20)) {
        EXPECT_TRUE(std::isfinite(decoded[i])) << i;
      }
    }
  }
}

}  // namespace
}  // namespace terse::testing
