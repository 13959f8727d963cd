// The blockwise integer quantizers int8/int4/int2: the stated error bounds (element-wise, both
// rounding modes, every dtype, partial last blocks, awkward magnitudes), unbiasedness of
// stochastic rounding, exact wire sizes and byte layout, exact decoding of constant blocks, error
// output, parameter and message validation, non-finite input, and GPU/CPU byte parity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"
#include "float16_reference.h"

namespace terse::testing {
namespace {

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

struct Config {
  int bits;
  bool absmax;
  bool stochastic;
  size_t block;

  std::string spec() const {
    return "int" + std::to_string(bits) + ":block=" + std::to_string(block) +
           ",mode=" + (absmax ? "absmax" : "minmax") +
           ",rounding=" + (stochastic ? "stochastic" : "nearest");
  }
  // minmax: 2^bits - 1 steps across [min, max]; absmax: 2^(bits-1) - 1 steps across [0, M].
  int levels() const { return absmax ? (1 << (bits - 1)) - 1 : (1 << bits) - 1; }
  size_t blocks(size_t count) const { return (count + block - 1) / block; }
  size_t message_bytes(size_t count) const {
    return kWireHeaderBytes + blocks(count) * 4 * (absmax ? 1 : 2) + (count * bits + 7) / 8;
  }
};

std::vector<Config> all_configs(size_t block = 256) {
  std::vector<Config> configs;
  for (int bits : {8, 4, 2}) {
    for (bool absmax : {false, true}) {
      for (bool stochastic : {false, true}) configs.push_back({bits, absmax, stochastic, block});
    }
  }
  return configs;
}

float wire_float(const std::vector<uint8_t>& message, size_t offset) {
  float value;
  memcpy(&value, message.data() + offset, sizeof(value));
  return value;
}

void set_wire_float(std::vector<uint8_t>* message, size_t offset, float value) {
  memcpy(message->data() + offset, &value, sizeof(value));
}

float block_scale(const std::vector<uint8_t>& message, size_t b) {
  return wire_float(message, kWireHeaderBytes + 4 * b);
}

WireHeader header_of(const std::vector<uint8_t>& message) {
  WireHeader header;
  memcpy(&header, message.data(), sizeof(header));
  return header;
}

void set_header(std::vector<uint8_t>* message, const WireHeader& header) {
  memcpy(message->data(), &header, sizeof(header));
}

// Inputs that stress the bound: per block a different magnitude (1e-30 .. 1e30), offset (values
// far from zero with a small spread), constant blocks, lone outliers, and subnormal blocks.
std::vector<float> varied_values(size_t count, size_t block, uint64_t seed) {
  std::vector<float> values = random_normal(count, seed);
  std::mt19937_64 random(seed);
  for (size_t first = 0; first < count; first += block) {
    const size_t last = std::min(count, first + block);
    const int kind = static_cast<int>(random() % 6);
    const float magnitude = std::pow(10.0f, static_cast<float>(random() % 61) - 30.0f);
    const float offset = static_cast<float>(random() % 2001) - 1000.0f;
    for (size_t i = first; i < last; ++i) {
      switch (kind) {
        case 0:
          values[i] *= magnitude;
          break;
        case 1:
          values[i] = offset + values[i] * 1e-3f;
          break;
        case 2:
          values[i] = offset * magnitude;
          break;
        case 3:
          values[i] = (i == first ? 1e4f : 1.0f) * values[i];
          break;
        case 4:
          values[i] *= 1e-40f;  // subnormal
          break;
        default:
          break;  // N(0, 1)
      }
    }
  }
  return values;
}

// varied_values as a tensor of `dtype`; fp16 clamped to its finite range (the codec refuses
// infinities, which larger values would become).
std::vector<uint8_t> varied_input(size_t count, size_t block, uint64_t seed, DType dtype) {
  std::vector<float> values = varied_values(count, block, seed);
  if (dtype == DType::kFloat16) {
    for (float& value : values) value = std::min(60000.0f, std::max(-60000.0f, value));
  }
  return to_dtype(values, dtype);
}

// The stated bound (int_quant_codecs.cpp): |x - x^| <= f * scale + 2^-20 * M + 2^-120 with
// f = 1/2 for nearest and 1 for stochastic rounding, M = max |x| over the block, scale from the
// message. Also checks that the scale is what the mode promises (range / levels, to a few
// roundings), so the bound is not met by a scale inflated on the wire.
void expect_within_bound(const Config& config, const std::vector<float>& values,
                         const std::vector<uint8_t>& message, const std::vector<float>& decoded) {
  const double factor = config.stochastic ? 1.0 : 0.5;
  for (size_t first = 0, b = 0; first < values.size(); first += config.block, ++b) {
    const size_t last = std::min(values.size(), first + config.block);
    double lo = values[first], hi = values[first], magnitude = 0;
    for (size_t i = first; i < last; ++i) {
      lo = std::min<double>(lo, values[i]);
      hi = std::max<double>(hi, values[i]);
      magnitude = std::max<double>(magnitude, std::fabs(values[i]));
    }
    const double scale = block_scale(message, b);
    const double range = config.absmax ? magnitude : hi - lo;
    ASSERT_LE(scale, range / config.levels() * (1 + 1e-6) + 1e-44) << "block " << b;
    ASSERT_GE(scale, range / config.levels() * (1 - 1e-6) - 1e-44) << "block " << b;
    const double bound = factor * scale + std::ldexp(magnitude, -20) + std::ldexp(1.0, -120);
    for (size_t i = first; i < last; ++i) {
      ASSERT_LE(std::fabs(double(values[i]) - decoded[i]), bound)
          << "element " << i << " of block " << b << ": x=" << values[i] << " x^=" << decoded[i]
          << " scale=" << scale;
    }
  }
}

TEST(IntQuantCodecs, SpecsSpellOutEveryParameter) {
  EXPECT_EQ(make("int8")->spec(), "int8:block=256,mode=minmax,rounding=nearest");
  EXPECT_EQ(make("int4:mode=absmax,block=64")->spec(),
            "int4:block=64,mode=absmax,rounding=nearest");
  EXPECT_EQ(make("int2:rounding=stochastic")->spec(),
            "int2:block=256,mode=minmax,rounding=stochastic");
  EXPECT_EQ(make("int8")->id(), CodecId::kInt8);
  EXPECT_EQ(make("int4")->id(), CodecId::kInt4);
  EXPECT_EQ(make("int2")->id(), CodecId::kInt2);
  EXPECT_EQ(make("int2")->family(), CodecFamily::kDense);
}

TEST(IntQuantCodecs, ErrorWithinStatedBoundForEveryDtypeAndLength) {
  for (size_t block : {size_t(8), size_t(256), size_t(4096)}) {
    for (const Config& config : all_configs(block)) {
      auto codec = make(config.spec());
      for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        for (size_t count : {size_t(1), size_t(7), size_t(255), size_t(257), size_t(5000)}) {
          SCOPED_TRACE(config.spec() + " " + dtype_name(dtype) + " x " + std::to_string(count));
          // Through the dtype and back: the bound is about the values the encoder saw.
          auto input = varied_input(count, block, count + block, dtype);
          auto values = from_dtype(input, dtype);
          EncodeContext context;
          context.seed = 1234 + count;
          auto message = encode_host(*codec, input, dtype, context);
          ASSERT_EQ(message.size(), config.message_bytes(count));
          auto decoded = decode_host(*codec, message, count, DType::kFloat32);
          expect_within_bound(config, values, message, decoded);
          // Decoding into the input's type is the fp32 result rounded once.
          EXPECT_EQ(decode_host(*codec, message, count, dtype),
                    from_dtype(to_dtype(decoded, dtype), dtype));
        }
      }
    }
  }
}

// Nearest rounding does use up to half a step: the bound is not loose by construction.
TEST(IntQuantCodecs, NearestRoundingErrorReachesNearlyHalfAStep) {
  for (const Config& config : all_configs()) {
    if (config.stochastic) continue;
    auto codec = make(config.spec());
    const size_t count = 4096;
    auto values = random_normal(count, 21);
    auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      worst = std::max(worst, std::fabs(double(values[i]) - decoded[i]) /
                                  block_scale(message, i / config.block));
    }
    EXPECT_GT(worst, 0.45) << config.spec();
    EXPECT_LE(worst, 0.5 + 1e-3) << config.spec();
  }
}

// Unbiasedness: per element, x^ is one of the two codes around x, up with probability equal to the
// fractional position, so over N independent seeds the mean has standard deviation at most
// scale / (2 sqrt(N)) (Bernoulli variance f(1 - f) <= 1/4 in units of scale). With N = 4000 each
// element's mean must lie within 6 such deviations (about 0.047 scale; a 6-sigma miss among
// these 4096 elements has probability ~1e-5), plus the 2^-20 M rounding bias. Deterministic
// rounding misses this by up to 0.5 scale. The mean over all elements and seeds, in units of
// scale, has deviation <= 0.5 / sqrt(N * n) and must be within 6 of those of 0.
TEST(IntQuantCodecs, StochasticRoundingIsUnbiased) {
  const size_t seeds = 4000;
  for (const Config& config : all_configs()) {
    if (!config.stochastic) continue;
    SCOPED_TRACE(config.spec());
    auto codec = make(config.spec());
    const size_t count = 4096;
    auto values = random_normal(count, 31);
    auto input = to_dtype(values, DType::kFloat32);
    std::vector<double> sum(count, 0.0);
    std::vector<float> scale(config.blocks(count));
    double total_error_in_steps = 0;
    for (size_t seed = 0; seed < seeds; ++seed) {
      EncodeContext context;
      context.seed = 0x5eed0000 + seed;
      auto message = encode_host(*codec, input, DType::kFloat32, context);
      auto decoded = decode_host(*codec, message, count, DType::kFloat32);
      for (size_t b = 0; b < scale.size(); ++b) scale[b] = block_scale(message, b);
      for (size_t i = 0; i < count; ++i) {
        sum[i] += decoded[i];
        total_error_in_steps += (double(decoded[i]) - values[i]) / scale[i / config.block];
      }
    }
    for (size_t i = 0; i < count; ++i) {
      const double step = scale[i / config.block];
      const double tolerance = 6 * step / (2 * std::sqrt(double(seeds))) +
                               std::ldexp(std::fabs(values[i]) + 4 * step * config.levels(), -20);
      ASSERT_NEAR(sum[i] / seeds, values[i], tolerance) << "element " << i;
    }
    const double overall = total_error_in_steps / (double(seeds) * count);
    EXPECT_LE(std::fabs(overall), 6 * 0.5 / std::sqrt(double(seeds) * count));
  }
}

TEST(IntQuantCodecs, StochasticRoundingDependsOnlyOnTheSeed) {
  auto codec = make("int4:rounding=stochastic");
  auto input = to_dtype(random_normal(3000, 41), DType::kFloat32);
  EncodeContext context;
  context.seed = 77;
  auto first = encode_host(*codec, input, DType::kFloat32, context);
  auto again = encode_host(*codec, input, DType::kFloat32, context);
  EXPECT_EQ(first, again);
  EXPECT_EQ(header_of(first).seed, 77u);
  context.seed = 78;
  EXPECT_NE(encode_host(*codec, input, DType::kFloat32, context), first);
  // Nearest rounding ignores the seed and leaves the header's seed 0.
  auto nearest = make("int4");
  auto plain = encode_host(*nearest, input, DType::kFloat32, context);
  EXPECT_EQ(header_of(plain).seed, 0u);
  context.seed = 79;
  EXPECT_EQ(encode_host(*nearest, input, DType::kFloat32, context), plain);
}

// Required ratios at block 256 on fp32: int8 <= 0.27, int4 <= 0.14; exact sizes per mode.
TEST(IntQuantCodecs, WireSizesAreExact) {
  const size_t count = size_t(1) << 20;
  auto input = to_dtype(random_normal(count, 51), DType::kFloat32);
  struct Case {
    const char* spec;
    size_t bytes;
  };
  const size_t blocks = count / 256;
  for (Case c : {Case{"int8", kWireHeaderBytes + blocks * 8 + count},
                 Case{"int4", kWireHeaderBytes + blocks * 8 + count / 2},
                 Case{"int2", kWireHeaderBytes + blocks * 8 + count / 4},
                 Case{"int8:mode=absmax", kWireHeaderBytes + blocks * 4 + count},
                 Case{"int4:mode=absmax", kWireHeaderBytes + blocks * 4 + count / 2},
                 Case{"int2:mode=absmax", kWireHeaderBytes + blocks * 4 + count / 4}}) {
    auto codec = make(c.spec);
    auto message = encode_host(*codec, input, DType::kFloat32);
    EXPECT_EQ(message.size(), c.bytes) << c.spec;
    EXPECT_EQ(codec->max_encoded_bytes(count, DType::kFloat32), c.bytes + escape_room(count))
        << c.spec;
  }
  const auto ratio = [&](const char* spec) {
    return double(encode_host(*make(spec), input, DType::kFloat32).size()) / (4 * count);
  };
  EXPECT_LE(ratio("int8"), 0.27);
  EXPECT_LE(ratio("int4"), 0.14);
  // A partial last block: 1000 elements in blocks of 256 is 4 blocks, 250 int4 code bytes.
  EXPECT_EQ(make("int4")->max_encoded_bytes(1000, DType::kBFloat16),
            kWireHeaderBytes + 32 + 500 + escape_room(1000));
  EXPECT_EQ(make("int2")->max_encoded_bytes(1001, DType::kFloat16),
            kWireHeaderBytes + 32 + 251 + escape_room(1001));
  EXPECT_EQ(make("int8")->max_encoded_bytes(0, DType::kFloat32), kWireHeaderBytes + escape_room(0));
}

// The payload layout documented in int_quant_codecs.cpp, byte for byte: scales, minimums, and
// planar codes (element j of a block with s code bytes in byte j % s at bit (j / s) * bits).
TEST(IntQuantCodecs, PayloadLayoutIsAsDocumented) {
  // Two blocks of 8 and a last block of 3; integer values with min 0 and max 2^bits - 1 make
  // scale 1 and the codes equal to the values.
  std::vector<float> int4_values = {0, 1, 2, 3, 4, 5, 6, 15};  // block 0
  for (float value : {15, 0, 0, 0, 0, 0, 0, 0}) int4_values.push_back(value);
  for (float value : {7, 9, 11}) int4_values.push_back(value);  // partial block 2
  auto message =
      encode_host(*make("int4:block=8"), to_dtype(int4_values, DType::kFloat32), DType::kFloat32);
  WireHeader header = header_of(message);
  EXPECT_EQ(header.param0, 8u);
  EXPECT_EQ(header.param1, 0u);
  EXPECT_EQ(header.flags, 0u);
  EXPECT_EQ(header.count, int4_values.size());
  ASSERT_EQ(message.size(), kWireHeaderBytes + 3 * 4 + 3 * 4 + 10);
  EXPECT_EQ(block_scale(message, 0), 1.0f);
  EXPECT_EQ(block_scale(message, 1), 1.0f);
  EXPECT_EQ(block_scale(message, 2), 4.0f / 15.0f);  // (11 - 7) / 15
  EXPECT_EQ(wire_float(message, kWireHeaderBytes + 12), 0.0f);
  EXPECT_EQ(wire_float(message, kWireHeaderBytes + 20), 7.0f);
  const size_t codes = kWireHeaderBytes + 24;
  // Block 0: s = 4, byte k = code[k] | code[k + 4] << 4.
  EXPECT_EQ(message[codes + 0], 0x40);
  EXPECT_EQ(message[codes + 1], 0x51);
  EXPECT_EQ(message[codes + 2], 0x62);
  EXPECT_EQ(message[codes + 3], 0xf3);
  // Block 1: 15 then zeros.
  EXPECT_EQ(message[codes + 4], 0x0f);
  EXPECT_EQ(message[codes + 5], 0x00);
  // Block 2: 3 elements, s = 2: byte 0 = code[0] | code[2] << 4, byte 1 = code[1] (codes 0,
  // 7.5 -> 8 (round half to even), 15).
  EXPECT_EQ(message[codes + 8], 0xf0);
  EXPECT_EQ(message[codes + 9], 0x08);

  const std::vector<float> int2_values = {0, 1, 2, 3, 3, 2, 1, 0, 0, 3, 1};
  message =
      encode_host(*make("int2:block=8"), to_dtype(int2_values, DType::kFloat32), DType::kFloat32);
  ASSERT_EQ(message.size(), kWireHeaderBytes + 2 * 8 + 3);
  const size_t int2_codes = kWireHeaderBytes + 16;
  // s = 2: byte k = c[k] | c[k+2] << 2 | c[k+4] << 4 | c[k+6] << 6.
  EXPECT_EQ(message[int2_codes + 0], 0 | 2 << 2 | 3 << 4 | 1 << 6);
  EXPECT_EQ(message[int2_codes + 1], 1 | 3 << 2 | 2 << 4 | 0 << 6);
  // Last block of 3, s = 1: c[0] | c[1] << 2 | c[2] << 4 = 0 | 3 << 2 | 1 << 4.
  EXPECT_EQ(message[int2_codes + 2], 0 | 3 << 2 | 1 << 4);

  // absmax: symmetric codes stored shifted by 2^(bits-1) - 1; no minimums on the wire.
  message = encode_host(*make("int8:block=8,mode=absmax"),
                        to_dtype({-127, 0, 1, 127, 0, 0, 0, 0}, DType::kFloat32), DType::kFloat32);
  ASSERT_EQ(message.size(), kWireHeaderBytes + 4 + 8);
  EXPECT_EQ(header_of(message).flags, 1u);
  EXPECT_EQ(block_scale(message, 0), 1.0f);
  const uint8_t expected[] = {0, 127, 128, 254, 127, 127, 127, 127};
  EXPECT_TRUE(std::equal(expected, expected + 8, message.begin() + kWireHeaderBytes + 4));
}

TEST(IntQuantCodecs, ConstantBlocksDecodeExactly) {
  const float constants[] = {0.0f, -0.0f, 3.14159265f, -2.5e-30f, 1e30f, -7.0f, 1e-41f, FLT_MAX};
  for (const Config& config : all_configs(64)) {
    auto codec = make(config.spec());
    for (float constant : constants) {
      // minmax represents any constant exactly (range 0); absmax only zero.
      if (config.absmax && constant != 0.0f) continue;
      SCOPED_TRACE(config.spec() + " constant " + std::to_string(constant));
      std::vector<float> values(200, constant);  // 3 full blocks and a partial one
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        auto input = to_dtype(values, dtype);
        auto exact = from_dtype(input, dtype);
        if (!std::isfinite(exact[0])) continue;  // FLT_MAX rounds to bf16's infinity
        std::vector<float> error(values.size());
        EncodeContext context;
        context.error = error.data();
        auto message = encode_host(*codec, input, dtype, context);
        EXPECT_EQ(decode_host(*codec, message, values.size(), DType::kFloat32), exact);
        EXPECT_EQ(decode_host(*codec, message, values.size(), dtype), exact);
        for (float e : error) ASSERT_EQ(e, 0.0f);
      }
    }
  }
}

// A constant block decodes to exactly the value the encoder read, so this checks that every finite
// half (subnormals included) is read exactly.
TEST(IntQuantCodecs, ReadsEveryFiniteHalfExactly) {
  std::vector<uint8_t> input;
  std::vector<float> expected;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    if ((bits & 0x7c00u) == 0x7c00u) continue;  // infinities and NaNs are refused
    for (int copy = 0; copy < 8; ++copy) {
      input.push_back(static_cast<uint8_t>(bits));
      input.push_back(static_cast<uint8_t>(bits >> 8));
      expected.push_back(half_to_float(static_cast<uint16_t>(bits)));
    }
  }
  auto codec = make("int8:block=8");
  auto message = encode_host(*codec, input, DType::kFloat16);
  EXPECT_EQ(decode_host(*codec, message, expected.size(), DType::kFloat32), expected);
}

// EncodeContext::error is input - decoded, exactly, on every path (full blocks, with the staged
// packing of int4/int2, and the partial last block).
TEST(IntQuantCodecs, ErrorOutputIsInputMinusDecoded) {
  for (const Config& config : all_configs(128)) {
    auto codec = make(config.spec());
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(config.spec() + " " + dtype_name(dtype));
      const size_t count = 128 * 9 + 77;
      auto input = varied_input(count, 128, 61, dtype);
      auto values = from_dtype(input, dtype);
      std::vector<float> error(count, 12345.0f);
      EncodeContext context;
      context.seed = 5;
      context.error = error.data();
      auto message = encode_host(*codec, input, dtype, context);
      auto decoded = decode_host(*codec, message, count, DType::kFloat32);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
      // The same message as without error output.
      context.error = nullptr;
      EXPECT_EQ(encode_host(*codec, input, dtype, context), message);
    }
  }
}

// The codec computes in fp32 whatever the input type: an fp16 or bf16 tensor encodes to the
// payload, and the error output, of the fp32 tensor holding its values (only the header's dtype
// differs), over several of the CPU path's 4096-element tiles, blocks larger than a tile, and a
// partial last block; and it decodes into fp16 and bf16 as its fp32 decode rounded to nearest even
// (float16_reference.h).
TEST(IntQuantCodecs, EncodesEveryDtypeAsItsFp32ValuesAndDecodesIntoIt) {
  for (size_t block : {size_t(256), size_t(5000)}) {
    for (const Config& config : all_configs(block)) {
      auto codec = make(config.spec());
      const size_t count = 256 * 40 + 77;
      for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
        SCOPED_TRACE(config.spec() + " " + dtype_name(dtype));
        const auto input = varied_input(count, block, 83, dtype);
        const auto values = from_dtype(input, dtype);
        std::vector<float> error(count), fp32_error(count);
        EncodeContext context;
        context.seed = 9;
        context.error = error.data();
        const auto message = encode_host(*codec, input, dtype, context);
        context.error = fp32_error.data();
        const auto fp32_message =
            encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32, context);
        ASSERT_EQ(
            std::vector<uint8_t>(message.begin() + kWireHeaderBytes, message.end()),
            std::vector<uint8_t>(fp32_message.begin() + kWireHeaderBytes, fp32_message.end()));
        ASSERT_EQ(memcmp(error.data(), fp32_error.data(), count * sizeof(float)), 0);
        const auto decoded = decode_host(*codec, message, count, DType::kFloat32);
        std::vector<uint16_t> output(count, 0x3c00u);  // 1.0 in fp16: overwritten, not added to
        ASSERT_EQ(codec->decode(message.data(), message.size(), output.data(), count, dtype, false,
                                DecodeContext{}),
                  ncclSuccess)
            << last_error();
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(output[i], dtype == DType::kFloat16 ? reference_float_to_half(decoded[i])
                                                        : reference_float_to_bf16(decoded[i]))
              << i << ": " << decoded[i];
        }
      }
    }
  }
}

TEST(IntQuantCodecs, DecodeAccumulatesIntoEveryDtype) {
  auto codec = make("int4:block=64");
  const size_t count = 1000;
  auto message =
      encode_host(*codec, to_dtype(random_normal(count, 71), DType::kFloat32), DType::kFloat32);
  auto decoded = decode_host(*codec, message, count, DType::kFloat32);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    auto output = to_dtype(random_normal(count, 72), dtype);
    auto initial = from_dtype(output, dtype);
    ASSERT_EQ(codec->decode(message.data(), message.size(), output.data(), count, dtype, true,
                            DecodeContext{}),
              ncclSuccess)
        << last_error();
    std::vector<float> expected(count);
    for (size_t i = 0; i < count; ++i) expected[i] = initial[i] + decoded[i];
    EXPECT_EQ(from_dtype(output, dtype), from_dtype(to_dtype(expected, dtype), dtype))
        << dtype_name(dtype);
  }
}

// Messages describe themselves: any int8 codec decodes any int8 message (block, mode).
TEST(IntQuantCodecs, DecodesMessagesOfAnyBlockAndMode) {
  auto sender = make("int8:block=40,mode=absmax");
  auto receiver = make("int8");
  const size_t count = 333;
  auto message =
      encode_host(*sender, to_dtype(random_normal(count, 81), DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(decode_host(*receiver, message, count, DType::kFloat32),
            decode_host(*sender, message, count, DType::kFloat32));
}

// Extremes of fp32: a range that overflows (max - min > FLT_MAX), values at FLT_MAX, subnormal
// blocks. Everything decodes finite and within the bound.
TEST(IntQuantCodecs, HandlesTheEndsOfTheFp32Range) {
  const std::vector<std::vector<float>> blocks = {
      {-FLT_MAX, FLT_MAX, 0.0f, 1e38f, -3e38f, 2e38f, -1.0f, 5.0f},
      {FLT_MAX, FLT_MAX * 0.999f, FLT_MAX * 0.5f, FLT_MAX, 3e38f, 3.3e38f, FLT_MAX, FLT_MAX},
      {-FLT_MAX, -FLT_MAX, -3e38f, -FLT_MAX, -2e38f, -FLT_MAX, -1e38f, 0.0f},
      {1e-45f, 3e-45f, 0.0f, -1e-45f, 2e-44f, 1e-44f, 0.0f, 7e-45f},
      {1e-38f, 1.1e-38f, 1.2e-38f, 9e-39f, 1.05e-38f, 1e-38f, 1e-38f, 1.17e-38f}};
  std::vector<float> values;
  for (const auto& block : blocks) values.insert(values.end(), block.begin(), block.end());
  for (const Config& config : all_configs(8)) {
    SCOPED_TRACE(config.spec());
    auto codec = make(config.spec());
    auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
    auto decoded = decode_host(*codec, message, values.size(), DType::kFloat32);
    for (size_t i = 0; i < values.size(); ++i) ASSERT_TRUE(std::isfinite(decoded[i])) << i;
    expect_within_bound(config, values, message, decoded);
  }
}

TEST(IntQuantCodecs, RefusesBadParametersNamingThem) {
  struct Case {
    const char* spec;
    const char* says;
  };
  for (Case c : {Case{"int8:block=0", "block=0 is outside [8, 65536]"},
                 Case{"int4:block=65544", "block=65544 is outside [8, 65536]"},
                 Case{"int2:block=12", "block=12 is not a multiple of 8"},
                 Case{"int8:block=abc", "block=abc is not an integer"},
                 Case{"int8:mode=max", "mode=max is not one of: minmax, absmax"},
                 Case{"int4:rounding=up", "rounding=up is not one of: nearest, stochastic"},
                 Case{"int2:levels=3", "unknown parameter 'levels'"}}) {
    std::unique_ptr<Codec> codec;
    EXPECT_EQ(create_codec(c.spec, &codec), ncclInvalidArgument) << c.spec;
    EXPECT_NE(std::string(last_error()).find(c.says), std::string::npos)
        << c.spec << ": " << last_error();
  }
}

ncclResult_t decode_fp32(const Codec& codec, const std::vector<uint8_t>& message, size_t count) {
  std::vector<float> output(count);
  return codec.decode(message.data(), message.size(), output.data(), count, DType::kFloat32, false,
                      DecodeContext{});
}

TEST(IntQuantCodecs, RefusesTamperedScalesMinimumsAndHeaders) {
  for (const char* spec : {"int8", "int4:mode=absmax", "int2"}) {
    SCOPED_TRACE(spec);
    auto codec = make(spec);
    const bool absmax = std::string(spec).find("absmax") != std::string::npos;
    const size_t count = 1000;  // 4 blocks
    auto valid =
        encode_host(*codec, to_dtype(random_normal(count, 91), DType::kFloat32), DType::kFloat32);
    ASSERT_EQ(decode_fp32(*codec, valid, count), ncclSuccess);
    const size_t scale1 = kWireHeaderBytes + 4;
    const size_t minimum1 = kWireHeaderBytes + 16 + 4;
    auto refused = [&](const std::vector<uint8_t>& message, const char* says) {
      EXPECT_EQ(decode_fp32(*codec, message, count), ncclInvalidArgument) << says;
      EXPECT_NE(std::string(last_error()).find(says), std::string::npos) << last_error();
    };
    for (float bad : {NAN, INFINITY, -INFINITY, -1.0f, -0.0f, -1e-45f}) {
      auto message = valid;
      set_wire_float(&message, scale1, bad);
      refused(message, "block 1 has scale");
    }
    // A scale whose top code would decode beyond fp32's range.
    auto message = valid;
    set_wire_float(&message, scale1, FLT_MAX / 2);
    refused(message, "block 1 has scale");
    if (!absmax) {
      for (float bad : {NAN, INFINITY, -INFINITY}) {
        message = valid;
        set_wire_float(&message, minimum1, bad);
        refused(message, "block 1 has scale");
      }
      message = valid;
      set_wire_float(&message, minimum1, FLT_MAX);
      set_wire_float(&message, scale1, 1e33f);
      refused(message, "block 1 has scale");
    }
    WireHeader header = header_of(valid);
    message = valid;
    header.flags = 4;
    set_header(&message, header);
    refused(message, "flags 0x04 hold unknown bits");
    for (uint32_t block : {0u, 4u, 12u, 65544u}) {
      header = header_of(valid);
      header.param0 = block;
      message = valid;
      set_header(&message, header);
      refused(message, ("block=" + std::to_string(block) + " is not a multiple of 8").c_str());
    }
    header = header_of(valid);
    header.param1 = 1;
    message = valid;
    set_header(&message, header);
    refused(message, "param1=1 is not 0");
    // Another valid block size or mode implies another length.
    header = header_of(valid);
    header.param0 = 512;
    message = valid;
    set_header(&message, header);
    refused(message, "its header implies");
    header = header_of(valid);
    header.flags ^= 1;
    message = valid;
    set_header(&message, header);
    refused(message, "its header implies");
  }
}

// Non-finite input cannot be represented: the block's scale is NaN on the wire (so every decoder
// refuses the message), its error output is NaN, and a host encode fails naming the block.
// A non-finite input never reaches the quantizer (Codec::encode escapes it:
// test_nonfinite_escapes.cpp), but a received block scale may still be NaN or Inf: refused.
TEST(IntQuantCodecs, DecoderRefusesANonFiniteBlockScale) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (const Config& config : all_configs(64)) {
      SCOPED_TRACE(config.spec() + " " + std::to_string(bad));
      auto codec = make(config.spec());
      const size_t count = 300;
      auto message = encode_host(*codec, to_dtype(random_normal(count, 101), DType::kFloat32),
                                 DType::kFloat32);
      set_wire_float(&message, kWireHeaderBytes + 4 * 2, bad);  // block 2's scale
      EXPECT_EQ(decode_fp32(*codec, message, count), ncclInvalidArgument);
      EXPECT_NE(std::string(last_error()).find("block 2 has scale"), std::string::npos)
          << last_error();
    }
  }
}

TEST(IntQuantCodecsGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (size_t block : {size_t(8), size_t(256), size_t(65536)}) {
    for (const Config& config : all_configs(block)) {
      auto codec = make(config.spec());
      for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        for (size_t count : {size_t(1), size_t(1000), size_t(100003)}) {
          SCOPED_TRACE(config.spec() + " " + dtype_name(dtype) + " x " + std::to_string(count));
          auto input = varied_input(count, block, 111 + count, dtype);
          std::vector<float> host_error(count);
          EncodeContext context;
          context.seed = 99;
          context.error = host_error.data();
          auto host_message = encode_host(*codec, input, dtype, context);
          std::vector<uint8_t> device_message;
          std::vector<float> device_error;
          context.error = nullptr;
          ASSERT_EQ(encode_device(*codec, input, dtype, context, &device_message, &device_error),
                    ncclSuccess)
              << last_error();
          ASSERT_EQ(device_message, host_message);
          ASSERT_EQ(device_error, host_error);
          auto initial = to_dtype(random_normal(count, 7), dtype);
          for (bool accumulate : {false, true}) {
            std::vector<float> device_output;
            ASSERT_EQ(decode_device(*codec, host_message, count, dtype, accumulate, initial,
                                    &device_output),
                      ncclSuccess)
                << last_error();
            auto host_output = initial;
            ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(),
                                    count, dtype, accumulate, DecodeContext{}),
                      ncclSuccess);
            ASSERT_EQ(device_output, from_dtype(host_output, dtype));
          }
        }
      }
    }
  }
}

TEST(IntQuantCodecsGpu, DeviceEscapesNonFiniteAsTheHostAndRefusesBadMessages) {
  TERSE_REQUIRE_GPU();
  auto codec = make("int4:block=64");
  const size_t count = 300;
  auto values = random_normal(count, 121);
  values[70] = NAN;
  auto input = to_dtype(values, DType::kFloat32);
  // The NaN travels in an escape section, from the device as from the host: the same bytes.
  const std::vector<uint8_t> host_message = encode_host(*codec, input, DType::kFloat32);
  std::vector<uint8_t> device_message;
  ASSERT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &device_message),
            ncclSuccess);
  EXPECT_EQ(device_message, host_message);
  std::vector<float> output;
  ASSERT_EQ(decode_device(*codec, device_message, count, DType::kFloat32, false, {}, &output),
            ncclSuccess)
      << last_error();
  const std::vector<float> host_output = decode_host(*codec, host_message, count, DType::kFloat32);
  EXPECT_TRUE(std::isnan(output[70]));
  output[70] = 0.0f;
  std::vector<float> expected = host_output;
  expected[70] = 0.0f;
  EXPECT_EQ(output, expected);
  auto valid =
      encode_host(*codec, to_dtype(random_normal(count, 122), DType::kFloat32), DType::kFloat32);
  auto tampered = valid;
  set_wire_float(&tampered, kWireHeaderBytes + 4 * 3, -1.0f);
  EXPECT_EQ(decode_device(*codec, tampered, count, DType::kFloat32, false, {}, &output),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block 3 has scale -1"), std::string::npos)
      << last_error();
  ASSERT_EQ(decode_device(*codec, valid, count, DType::kFloat32, false, {}, &output), ncclSuccess);
  EXPECT_EQ(output, decode_host(*codec, valid, count, DType::kFloat32));
}

}  // namespace
}  // namespace terse::testing
