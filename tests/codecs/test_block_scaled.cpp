// The block-scaled codecs mxfp8 (E4M3 and E5M2), mxfp4 and nvfp4 against a reference written
// here from the format specifications (OCP Microscaling Formats v1.0 for the elements, E8M0 and
// the MX scale rule; NVIDIA's NVFP4 two-level scale as block_scaled_codecs.cpp documents it): the
// element code points are enumerated from the formula sign * 2^(E - bias) * 1.M (0.M * 2^(1 -
// bias) when E = 0), rounding is a search for the nearest code point (ties to the even code) or
// the stochastic pick between the two neighbours, never the codec's bit arithmetic. Encoded bytes,
// decoded values and the error output must match it bit for bit; the stated error bounds hold and
// are nearly reached; stochastic rounding is unbiased; decoders refuse every NaN/Inf or
// out-of-range scale and code; the GPU writes the host's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/rounding_random.h"
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

// ---- The element formats, from the specification's definitions.

struct Format {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  int emax;  // emax_elem of the MX scale rule: the exponent of the largest normal binade
  enum Specials { kNone, kE4M3, kIeee } specials;

  int bits() const { return 1 + exponent_bits + mantissa_bits; }
  uint32_t sign_bit() const { return 1u << (bits() - 1); }
  // The value of a code; NaN or +-Inf for the special codes of the format.
  double value(uint32_t code) const {
    const uint32_t mantissa = code & ((1u << mantissa_bits) - 1);
    const uint32_t exponent = (code >> mantissa_bits) & ((1u << exponent_bits) - 1);
    const double sign = (code & sign_bit()) ? -1.0 : 1.0;
    const uint32_t all_ones = (1u << exponent_bits) - 1;
    if (specials == kE4M3 && exponent == all_ones && mantissa == (1u << mantissa_bits) - 1) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (specials == kIeee && exponent == all_ones) {
      return mantissa == 0 ? sign * INFINITY : std::numeric_limits<double>::quiet_NaN();
    }
    const double fraction = std::ldexp(double(mantissa), -mantissa_bits);
    if (exponent == 0) return sign * std::ldexp(fraction, 1 - bias);
    return sign * std::ldexp(1.0 + fraction, int(exponent) - bias);
  }
  // The non-negative finite values, by code (they increase with the code).
  std::vector<double> magnitudes() const {
    std::vector<double> values;
    for (uint32_t code = 0; code < sign_bit(); ++code) {
      if (std::isfinite(value(code))) values.push_back(value(code));
    }
    return values;
  }
  double max_normal() const { return magnitudes().back(); }
};

const Format kE4M3{"e4m3", 4, 3, 7, 8, Format::kE4M3};
const Format kE5M2{"e5m2", 5, 2, 15, 15, Format::kIeee};
const Format kE2M1{"e2m1", 2, 1, 1, 2, Format::kNone};

// The magnitude code of y >= 0: saturating at the max normal; nearest with ties to the even
// code, or up with probability frac (decided as frac >= 1 - u).
uint32_t round_magnitude(const Format& f, double y, bool stochastic, double u) {
  const std::vector<double> v = f.magnitudes();
  if (y >= v.back()) return uint32_t(v.size() - 1);
  size_t i = size_t(std::upper_bound(v.begin(), v.end(), y) - v.begin()) - 1;
  if (v[i] == y) return uint32_t(i);
  if (stochastic) {
    const double fraction = (y - v[i]) / (v[i + 1] - v[i]);
    return uint32_t(fraction >= 1.0 - u ? i + 1 : i);
  }
  const double below = y - v[i], above = v[i + 1] - y;
  if (below != above) return uint32_t(below < above ? i : i + 1);
  return uint32_t(i % 2 == 0 ? i : i + 1);
}

uint32_t signed_code(const Format& f, float x, uint32_t magnitude) {
  return (std::signbit(x) ? f.sign_bit() : 0u) | magnitude;
}

// ---- The codecs' messages, from the wire format the codec file documents.

struct Reference {
  std::vector<uint8_t> scales;
  std::vector<uint32_t> codes;
  std::vector<float> decoded;
  float tensor_scale = 0.0f;  // nvfp4
};

double uniform_of(uint64_t seed, size_t i) {
  return rounding_uniform(rounding_key(seed), uint64_t(i));
}

// MX: scale 2^e per 32, e = floor(log2 amax) - emax, at least -127 (and -127 for amax 0).
Reference reference_mx(const Format& f, const std::vector<float>& x, bool stochastic,
                       uint64_t seed) {
  Reference ref;
  for (size_t first = 0; first < x.size(); first += 32) {
    const size_t end = std::min(x.size(), first + 32);
    double amax = 0;
    for (size_t i = first; i < end; ++i) amax = std::max(amax, std::fabs(double(x[i])));
    int e = amax == 0 ? -127 : std::ilogb(amax) - f.emax;
    e = std::max(e, -127);
    ref.scales.push_back(uint8_t(e + 127));
    for (size_t i = first; i < end; ++i) {
      const double y = std::ldexp(std::fabs(double(x[i])), -e);
      const uint32_t code =
          signed_code(f, x[i], round_magnitude(f, y, stochastic, uniform_of(seed, i)));
      ref.codes.push_back(code);
      ref.decoded.push_back(float(std::ldexp(f.value(code), e)));
    }
  }
  return ref;
}

// NVFP4 as block_scaled_codecs.cpp defines it (its fp32 operations written out).
Reference reference_nv(const std::vector<float>& x, bool stochastic, uint64_t seed) {
  Reference ref;
  float amax_tensor = 0;
  for (float v : x) amax_tensor = std::max(amax_tensor, std::fabs(v));
  float s = amax_tensor / 2688.0f;
  while (!std::isfinite(6.0f * (448.0f * s))) s = std::nextafter(s, 0.0f);
  ref.tensor_scale = s;
  for (size_t first = 0; first < x.size(); first += 16) {
    const size_t end = std::min(x.size(), first + 16);
    float amax = 0;
    for (size_t i = first; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint32_t scale_code =
        s == 0.0f ? 0u : round_magnitude(kE4M3, double(amax / (6.0f * s)), false, 0.0);
    ref.scales.push_back(uint8_t(scale_code));
    const float d = float(kE4M3.value(scale_code)) * s;
    for (size_t i = first; i < end; ++i) {
      const uint32_t magnitude = d == 0.0f ? 0u
                                           : round_magnitude(kE2M1, double(std::fabs(x[i]) / d),
                                                             stochastic, uniform_of(seed, i));
      const uint32_t code = signed_code(kE2M1, x[i], magnitude);
      ref.codes.push_back(code);
      ref.decoded.push_back(float(kE2M1.value(code)) * d);
    }
  }
  return ref;
}

struct Case {
  std::string spec;
  const Format* format;
  bool nv;
  bool stochastic;
  CodecId id;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (bool stochastic : {false, true}) {
    const std::string rounding = stochastic ? "rounding=stochastic" : "rounding=nearest";
    all.push_back({"mxfp8:" + rounding, &kE4M3, false, stochastic, CodecId::kMxfp8});
    all.push_back({"mxfp8:elem=e5m2," + rounding, &kE5M2, false, stochastic, CodecId::kMxfp8});
    all.push_back({"mxfp4:" + rounding, &kE2M1, false, stochastic, CodecId::kMxfp4});
    all.push_back({"nvfp4:" + rounding, &kE2M1, true, stochastic, CodecId::kNvfp4});
  }
  return all;
}

Reference reference_of(const Case& c, const std::vector<float>& x, uint64_t seed) {
  return c.nv ? reference_nv(x, c.stochastic, seed)
              : reference_mx(*c.format, x, c.stochastic, seed);
}

// The message the reference says the codec writes: header, scale bytes, codes.
std::vector<uint8_t> reference_message(const Case& c, const Reference& ref, size_t count,
                                       DType dtype, uint64_t seed) {
  WireHeader header;
  header.codec = uint8_t(c.id);
  header.dtype = uint8_t(dtype);
  header.count = count;
  header.param0 = c.nv ? 16 : 32;
  uint32_t tensor_bits;
  memcpy(&tensor_bits, &ref.tensor_scale, 4);
  header.param1 = c.nv ? tensor_bits : 0;
  header.flags = uint8_t((c.format == &kE5M2 ? 1 : 0) | (c.stochastic ? 2 : 0));
  header.seed = c.stochastic ? seed : 0;
  std::vector<uint8_t> message(sizeof(header));
  memcpy(message.data(), &header, sizeof(header));
  message.insert(message.end(), ref.scales.begin(), ref.scales.end());
  if (c.format->bits() == 8) {
    for (uint32_t code : ref.codes) message.push_back(uint8_t(code));
  } else {
    for (size_t i = 0; i < ref.codes.size(); i += 2) {
      const uint32_t high = i + 1 < ref.codes.size() ? ref.codes[i + 1] : 0u;
      message.push_back(uint8_t(ref.codes[i] | (high << 4)));
    }
  }
  return message;
}

uint32_t bits_of(float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return bits;
}

// Inputs that reach every corner: blocks of widely different magnitudes (down to fp32
// subnormals and up to near FLT_MAX), zero blocks, blocks whose maximum lands just below the
// next power of two (so the MX scale saturates elements), exact code points and ties.
std::vector<float> varied_input(size_t count, uint64_t seed) {
  std::vector<float> x = random_normal(count, seed);
  std::mt19937_64 rng(seed);
  for (size_t first = 0; first < count; first += 16) {
    const size_t end = std::min(count, first + 16);
    const int kind = int(rng() % 8);
    const int exponent = int(rng() % 250) - 140;
    for (size_t i = first; i < end; ++i) {
      switch (kind) {
        case 0:
          x[i] = 0.0f;
          break;
        case 1:
          x[i] = std::ldexp(x[i], exponent);
          break;
        case 2:
          // Every element a small integer times a power of two: code points and midpoints.
          x[i] = std::ldexp(float(int(rng() % 33) - 16), int(rng() % 5) - 2);
          break;
        case 3:
          x[i] = (i == first ? 1.99f : 1.0f) * std::ldexp(x[i] / 4.0f, exponent / 8);
          break;
        case 4:
          x[i] = std::ldexp(x[i], -140 + int(rng() % 10));  // fp32 subnormals
          break;
        default:
          break;
      }
    }
  }
  return x;
}

class BlockScaled : public ::testing::TestWithParam<Case> {};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name;
  for (char c : info.param.spec) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, BlockScaled, ::testing::ValuesIn(cases()), case_name);

// The cases a test applies to, each its own suite (no case is generated only to be skipped).
std::vector<Case> cases_where(bool (*keep)(const Case&)) {
  std::vector<Case> kept;
  for (const Case& c : cases()) {
    if (keep(c)) kept.push_back(c);
  }
  return kept;
}
// The MX formats: a power-of-two scale.
class BlockScaledMx : public BlockScaled {};
INSTANTIATE_TEST_SUITE_P(MxFormats, BlockScaledMx,
                         ::testing::ValuesIn(cases_where([](const Case& c) { return !c.nv; })),
                         case_name);
// The MX formats with nearest rounding.
class BlockScaledMxNearest : public BlockScaled {};
INSTANTIATE_TEST_SUITE_P(MxNearest, BlockScaledMxNearest,
                         ::testing::ValuesIn(cases_where([](const Case& c) {
                           return !c.nv && !c.stochastic;
                         })),
                         case_name);
// nvfp4.
class BlockScaledNv : public BlockScaled {};
INSTANTIATE_TEST_SUITE_P(Nvfp4, BlockScaledNv,
                         ::testing::ValuesIn(cases_where([](const Case& c) { return c.nv; })),
                         case_name);
// Stochastic rounding.
class BlockScaledStochastic : public BlockScaled {};
INSTANTIATE_TEST_SUITE_P(
    Stochastic, BlockScaledStochastic,
    ::testing::ValuesIn(cases_where([](const Case& c) { return c.stochastic; })), case_name);

TEST(BlockScaledFormats, SpecificationFacts) {
  EXPECT_EQ(kE4M3.max_normal(), 448.0);
  EXPECT_EQ(kE5M2.max_normal(), 57344.0);
  EXPECT_EQ(kE2M1.magnitudes(), (std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6}));
  EXPECT_TRUE(std::isnan(kE4M3.value(0x7f)) && std::isnan(kE4M3.value(0xff)));
  EXPECT_EQ(kE4M3.value(0x7e), 448.0);
  EXPECT_EQ(kE4M3.value(0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(kE5M2.value(0x7c), INFINITY);
  EXPECT_EQ(kE5M2.value(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(kE5M2.value(0x7d)));
  EXPECT_EQ(kE5M2.value(0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(kE4M3.magnitudes().size(), 127u);
  EXPECT_EQ(kE5M2.magnitudes().size(), 124u);
}

// Every code point of every element format: a block whose maximum pins the MX scale at 2^0
// (the max normal) then holds each non-negative and negative code point; each is encoded to its
// own code and decodes to its own value.
TEST_P(BlockScaledMx, EveryCodePointEncodesToItselfAndDecodesToItsValue) {
  const Case& c = GetParam();  // nvfp4's scale is not a power of two; its grid is covered below
  auto codec = make(c.spec);
  std::vector<float> x;
  for (double v : c.format->magnitudes()) {
    for (double signed_v : {v, -v}) {
      if (x.size() % 32 == 0) x.push_back(float(c.format->max_normal()));
      x.push_back(float(signed_v));
    }
  }
  const Reference ref = reference_of(c, x, 5);
  for (size_t b = 0; b < ref.scales.size(); ++b) EXPECT_EQ(ref.scales[b], 127) << b;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(ref.decoded[i], x[i]) << i;
  EncodeContext context;
  context.seed = 5;
  const auto message = encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32, context);
  EXPECT_EQ(message, reference_message(c, ref, x.size(), DType::kFloat32, 5));
  const auto decoded = decode_host(*codec, message, x.size(), DType::kFloat32);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bits_of(decoded[i]), bits_of(x[i])) << i;
}

// Midpoints between neighbouring code points (ties go to the even code), and points a quarter
// of the way (nearest goes to the closer one), at the same pinned scale.
TEST_P(BlockScaledMxNearest, TiesGoToTheEvenCodeAndOthersToTheNearest) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  const std::vector<double> v = c.format->magnitudes();
  std::vector<float> x;
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    for (double t : {0.5, 0.25, 0.75}) {
      if (x.size() % 32 == 0) x.push_back(float(c.format->max_normal()));
      x.push_back(float(v[i] + t * (v[i + 1] - v[i])));
    }
  }
  // Beyond the max normal, below the next power of two: saturates.
  x.push_back(float(c.format->max_normal() * 1.1));
  const Reference ref = reference_of(c, x, 0);
  // Check the reference itself on a few spec examples before trusting it for the bytes.
  if (c.format == &kE2M1) {
    EXPECT_EQ(round_magnitude(kE2M1, 5.0, false, 0), 6u);   // 5 between 4 (110) and 6 (111)
    EXPECT_EQ(round_magnitude(kE2M1, 2.5, false, 0), 4u);   // 2.5 between 2 (100) and 3 (101)
    EXPECT_EQ(round_magnitude(kE2M1, 0.25, false, 0), 0u);  // 0.25 between 0 and 0.5
    EXPECT_EQ(round_magnitude(kE2M1, 7.9, false, 0), 7u);   // saturates at 6
  }
  const auto message = encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(message, reference_message(c, ref, x.size(), DType::kFloat32, 0));
}

// Random and adversarial inputs of every dtype and awkward lengths: the bytes, the decoded
// values (overwriting and accumulating) and the error output all equal the reference's.
TEST_P(BlockScaled, BytesDecodeAndErrorEqualTheReference) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (size_t count : {size_t(1), size_t(15), size_t(33), size_t(1000), size_t(4099)}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(count));
      const uint64_t seed = 17 + count;
      std::vector<float> values = varied_input(count, seed);
      if (dtype != DType::kFloat32) {
        // 16-bit types: magnitudes they can hold, read back as the codec sees them.
        for (float& v : values) v = std::isfinite(v) ? std::fmod(v, 1000.0f) : 0.0f;
        values = from_dtype(to_dtype(values, dtype), dtype);
      }
      const Reference ref = reference_of(c, values, seed);
      std::vector<float> error(count);
      EncodeContext context;
      context.seed = seed;
      context.error = error.data();
      const auto input = to_dtype(values, dtype);
      const auto message = encode_host(*codec, input, dtype, context);
      ASSERT_EQ(message, reference_message(c, ref, count, dtype, seed));
      const auto decoded = decode_host(*codec, message, count, DType::kFloat32);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(bits_of(decoded[i]), bits_of(ref.decoded[i])) << i << " x=" << values[i];
        ASSERT_EQ(bits_of(error[i]), bits_of(values[i] - ref.decoded[i])) << i;
      }
      std::vector<float> sum = random_normal(count, 3);
      const std::vector<float> initial = sum;
      ASSERT_EQ(codec->decode(message.data(), message.size(), sum.data(), count, DType::kFloat32,
                              true, DecodeContext{}),
                ncclSuccess);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(sum[i], initial[i] + ref.decoded[i]) << i;
    }
  }
}

// Decoding into fp16 and bf16 tensors, overwriting and accumulating: each element is the
// reference's decoded value, saturated at the type's largest finite magnitude (65504, or bf16's
// 0x7f7f), plus the old element when accumulating, rounded to nearest even (float16_reference.h).
// Inputs reach beyond fp16's range, so saturation is exercised; lengths cover whole tiles of the
// SIMD path (4096 elements) and partial groups after them.
TEST_P(BlockScaled, DecodesIntoHalfAndBfloat16AsTheReference) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  for (size_t count : {size_t(1000), size_t(8192 + 300)}) {
    const uint64_t seed = 5 + count;
    std::vector<float> values = varied_input(count, seed);
    for (float& v : values) v = std::fmod(v, 1e6f);
    const Reference ref = reference_of(c, values, seed);
    EncodeContext context;
    context.seed = seed;
    const auto message =
        encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32, context);
    ASSERT_EQ(message, reference_message(c, ref, count, DType::kFloat32, seed));
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      const bool half = dtype == DType::kFloat16;
      const float limit = half ? 65504.0f : reference_float(0x7f7f0000u);
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(count) +
                     (accumulate ? " accumulating" : ""));
        std::vector<uint16_t> output(count);
        for (size_t i = 0; i < count; ++i) output[i] = uint16_t(0x3c00u + i % 0x3000u);
        const std::vector<uint16_t> initial = output;
        ASSERT_EQ(codec->decode(message.data(), message.size(), output.data(), count, dtype,
                                accumulate, DecodeContext{}),
                  ncclSuccess)
            << last_error();
        for (size_t i = 0; i < count; ++i) {
          float v = std::min(std::max(ref.decoded[i], -limit), limit);
          if (accumulate) {
            v += half ? reference_half_to_float(initial[i]) : reference_bf16_to_float(initial[i]);
          }
          ASSERT_EQ(output[i], half ? reference_float_to_half(v) : reference_float_to_bf16(v))
              << i << ": decoded " << ref.decoded[i];
        }
      }
    }
  }
}

// nvfp4's quotients |x| / D placed on, and one float either side of, every E2M1 code point and
// midpoint, under block scales D that are not powers of two: an encoder must keep the
// division's bytes exactly (a multiply by fl(1 / D) does not). Long enough for whole groups of
// blocks, which the SIMD kernels take.
TEST_P(BlockScaledNv, Nvfp4QuotientsAtRoundingPointsEqualTheReference) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  const std::vector<double> magnitudes = kE2M1.magnitudes();
  std::vector<double> points;  // code points and midpoints, in units of D
  for (size_t i = 0; i < magnitudes.size(); ++i) {
    points.push_back(magnitudes[i]);
    if (i + 1 < magnitudes.size()) points.push_back((magnitudes[i] + magnitudes[i + 1]) / 2);
  }
  // Block maxima 6 * v for E4M3 values v, under a tensor scale s that is not 1 (the first
  // element is the tensor's max, above every block's, so that s is the codec's); among them
  // values whose fl(1 / D) takes some of the products below across a rounding point (0.0234375:
  // fl(1.25 D) * fl(1 / D) rounds to 1.25 + 2^-23, a tie to nearest no longer: nearest
  // rounding fails here without the division). Stochastic rounding's threshold 1 - u is not
  // placed by the test.
  const std::vector<float> block_values = {
      1.125f, 1.375f, 13.0f,      2.5f,        0.3125f,      36.0f,       0.875f,
      7.5f,   104.0f, 0.0234375f, 0.01953125f, 0.021484375f, 0.02734375f, 0.0253906250f};
  const float tensor_max = 2688.0f * 0.7f;
  const float s = tensor_max / 2688.0f;
  std::vector<float> x;
  for (int copy = 0; copy < 2; ++copy) {
    for (float v : block_values) {
      const float d = v * s;
      for (int step = -1; step <= 1; ++step) {  // one float below, on, above each point
        x.push_back(x.empty() ? tensor_max : 6.0f * v * s);
        for (size_t j = 0; j < points.size(); ++j) {
          const float point = float(points[j] * d);
          const float value = step < 0   ? std::nextafter(point, 0.0f)
                              : step > 0 ? std::nextafter(point, 1e30f)
                                         : point;
          x.push_back(j % 2 == 0 ? value : -value);
        }
      }
    }
  }
  for (uint64_t seed : {uint64_t(1), uint64_t(2)}) {
    const Reference ref = reference_of(c, x, seed);
    EncodeContext context;
    context.seed = seed;
    const auto message =
        encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32, context);
    ASSERT_EQ(message, reference_message(c, ref, x.size(), DType::kFloat32, seed));
  }
}

// The stated bound holds on every element (in tensor-max terms, as ErrorBound states it), and
// per block against the block's own max for MX; and inputs built to hit the worst case come
// within 80% of it, so the bound is not vacuous.
TEST_P(BlockScaled, StatedBoundHoldsAndIsNearlyReached) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  const double factor = codec->error_bound(0).factor;
  ASSERT_TRUE(codec->error_bound(0).stated);
  const size_t count = 1 << 16;
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<float> x = random_normal(count, seed);
    // Blocks whose maximum sits just below the next power of two (MX saturates it), or just
    // above one (the top binade's quantum is then largest against the maximum).
    for (size_t b = 0; b < count; b += 32) {
      const float above = b / 32 % 2 == 0 ? 1.99f : 1.0f + 0.01f * float(b / 64 % 8);
      x[b] = std::ldexp(above, int(b / 32 % 7));
    }
    EncodeContext context;
    context.seed = seed;
    const auto message =
        encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32, context);
    const auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    const size_t block = c.nv ? 16 : 32;
    double tensor_max = 0, worst = 0;
    for (float v : x) tensor_max = std::max(tensor_max, std::fabs(double(v)));
    for (size_t first = 0; first < count; first += block) {
      double block_max = 0;
      for (size_t i = first; i < first + block; ++i) {
        block_max = std::max(block_max, std::fabs(double(x[i])));
      }
      for (size_t i = first; i < first + block; ++i) {
        const double e = std::fabs(double(decoded[i]) - double(x[i]));
        ASSERT_LE(e, factor * tensor_max) << i;
        ASSERT_LE(e, factor * block_max + std::ldexp(1.0, -120)) << i;
        worst = std::max(worst, e / block_max);
      }
    }
    EXPECT_GT(worst, 0.8 * factor) << c.spec;
  }
}

// E[decode(encode(x))] = x for every element the scale does not push past the max normal: the
// mean over many seeds converges to x (within 4 standard errors of a quantum). Here each block's
// maximum is chosen so that nothing saturates (MX: a power of two, at 2^emax in element units;
// nvfp4: 6 times an E4M3 value under a tensor scale of exactly 1). Saturation clips towards zero
// whatever the rounding, so the codecs do not claim unbiased() (the bound test reaches it).
// Saturation clips towards zero, whatever the rounding: no format claims unbiased().
TEST_P(BlockScaled, NoFormatClaimsToBeUnbiased) {
  EXPECT_FALSE(make(GetParam().spec)->unbiased());
}

TEST_P(BlockScaledStochastic, StochasticRoundingIsUnbiasedBelowSaturation) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  const size_t count = 64;
  std::vector<float> x = random_normal(count, 8);
  for (float& v : x) v = std::max(-0.99f, std::min(0.99f, v / 3.0f));
  // nvfp4: the first block's 2688 makes the tensor scale 1; E4M3 values 448, 1, 3.5, 0.125.
  const float nv_max[4] = {2688.0f, 6.0f, 21.0f, 0.75f};
  const float mx_max[4] = {1024.0f, 1.0f, 4.0f, 0.125f};
  const float* maxima = c.nv ? nv_max : mx_max;
  const size_t block = c.nv ? 16 : 32;
  for (size_t first = 0; first < count; first += block) {
    const float m = maxima[(first / block) % 4];
    for (size_t i = first; i < first + block; ++i) x[i] *= m;
    x[first] = m;
  }
  const int trials = 4000;
  std::vector<double> mean(count, 0);
  std::vector<float> quantum(count, 0);
  for (int t = 0; t < trials; ++t) {
    EncodeContext context;
    context.seed = uint64_t(t) * 7919 + 1;
    const auto message =
        encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32, context);
    const auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    for (size_t i = 0; i < count; ++i) {
      mean[i] += decoded[i] / double(trials);
      quantum[i] = std::max(quantum[i], std::fabs(decoded[i] - x[i]));
    }
  }
  for (size_t i = 0; i < count; ++i) {
    EXPECT_NEAR(mean[i], x[i], 4 * quantum[i] / std::sqrt(double(trials)) + 1e-7) << i;
  }
}

// Wire sizes as the format says: 32 + blocks + codes.
TEST_P(BlockScaled, WireBytesAreTheFormats) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  for (size_t count : {size_t(0), size_t(1), size_t(31), size_t(32), size_t(1001)}) {
    const size_t block = c.nv ? 16 : 32;
    const size_t codes = c.format->bits() == 8 ? count : (count + 1) / 2;
    const size_t expected = kWireHeaderBytes + (count + block - 1) / block + codes;
    EXPECT_EQ(codec->wire_bytes(count, DType::kFloat32, MatrixShape{}), expected) << count;
    EXPECT_EQ(codec->max_encoded_bytes(count, DType::kFloat32), expected + escape_room(count));
  }
  EXPECT_FALSE(codec->linear());
  EXPECT_TRUE(codec->stable_under_error_feedback());
}

// Non-finite inputs travel exactly beside the message (nonfinite_escapes.h); the rest of the
// block they sat in is encoded as if they were zero.
TEST_P(BlockScaled, NonFiniteInputsAreCarriedExactly) {
  const Case& c = GetParam();
  auto codec = make(c.spec);
  std::vector<float> x = random_normal(100, 4);
  x[3] = NAN;
  x[40] = INFINITY;
  x[77] = -INFINITY;
  std::vector<float> zeroed = x;
  zeroed[3] = zeroed[40] = zeroed[77] = 0.0f;
  const Reference ref = reference_of(c, zeroed, 0);
  const auto decoded =
      decode_host(*codec, encode_host(*codec, to_dtype(x, DType::kFloat32), DType::kFloat32),
                  x.size(), DType::kFloat32);
  EXPECT_TRUE(std::isnan(decoded[3]));
  EXPECT_EQ(decoded[40], INFINITY);
  EXPECT_EQ(decoded[77], -INFINITY);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i])) {
      EXPECT_EQ(decoded[i], ref.decoded[i]) << i;
    }
  }
}

// A message with one byte changed to something no encoder writes is refused, naming it.
void expect_refused(const Codec& codec, std::vector<uint8_t> message, size_t offset, uint8_t byte,
                    size_t count, const char* says) {
  message[offset] = byte;
  std::vector<float> out(count);
  EXPECT_EQ(codec.decode(message.data(), message.size(), out.data(), count, DType::kFloat32, false,
                         DecodeContext{}),
            ncclInvalidArgument)
      << "byte " << offset << " = " << int(byte);
  EXPECT_NE(std::string(last_error()).find(says), std::string::npos) << last_error();
}

TEST(BlockScaledValidation, DecodersRefuseWhatNoEncoderWrites) {
  const size_t count = 65;  // three MX blocks, five nvfp4 blocks; odd: a padding nibble
  const auto x = to_dtype(random_normal(count, 9), DType::kFloat32);
  const size_t h = kWireHeaderBytes;
  auto e4m3 = make("mxfp8");
  auto m = encode_host(*e4m3, x, DType::kFloat32);
  expect_refused(*e4m3, m, h + 1, 0xff, count, "scale of block 1 is 0xff");  // E8M0 NaN
  expect_refused(*e4m3, m, h + 1, 127 + 120, count, "scale of block 1");     // 448 * 2^120
  expect_refused(*e4m3, m, h + 3 + 10, 0x7f, count, "element 10 has code 0x7f");
  expect_refused(*e4m3, m, h + 3 + 11, 0xff, count, "element 11 has code 0xff");
  expect_refused(*e4m3, m, 7, 0x04, count, "flags");
  expect_refused(*e4m3, m, 16, 16, count, "block=16");
  std::vector<float> ok(count);
  m[h + 1] = 127 + 119;  // the largest an encoder writes: accepted, decodes finite
  ASSERT_EQ(e4m3->decode(m.data(), m.size(), ok.data(), count, DType::kFloat32, false, {}),
            ncclSuccess);
  for (float v : ok) EXPECT_TRUE(std::isfinite(v));

  auto e5m2 = make("mxfp8:elem=e5m2");
  m = encode_host(*e5m2, x, DType::kFloat32);
  expect_refused(*e5m2, m, h + 3 + 5, 0x7c, count, "element 5 has code 0x7c");  // +Inf
  expect_refused(*e5m2, m, h + 3 + 5, 0xfe, count, "element 5 has code 0xfe");  // NaN
  expect_refused(*e5m2, m, h, 127 + 113, count, "scale of block 0");

  auto fp4 = make("mxfp4");
  m = encode_host(*fp4, x, DType::kFloat32);
  expect_refused(*fp4, m, m.size() - 1, uint8_t(m.back() | 0x10), count, "padding nibble");
  expect_refused(*fp4, m, h + 2, 127 + 126, count, "scale of block 2");
  expect_refused(*fp4, m, 7, 0x01, count, "flags");  // the E5M2 flag means nothing to mxfp4

  auto nv = make("nvfp4");
  m = encode_host(*nv, x, DType::kFloat32);
  expect_refused(*nv, m, h + 4, 0x7f, count, "scale of block 4");  // E4M3 NaN
  expect_refused(*nv, m, h + 4, 0x81, count, "scale of block 4");  // negative
  expect_refused(*nv, m, 23, 0x80, count, "tensor scale");         // param1 sign bit
  expect_refused(*nv, m, 23, 0x7f, count, "tensor scale");         // 2^128-ish: too large
  auto nan_scale = m;
  nan_scale[22] = 0xc0;
  expect_refused(*nv, nan_scale, 23, 0x7f, count, "tensor scale");  // NaN
}

TEST(BlockScaledParameters, NamesParseAndSpecsSpellEverythingOut) {
  EXPECT_EQ(make("mxfp8")->spec(), "mxfp8:elem=e4m3,rounding=nearest");
  EXPECT_EQ(make("mxfp8:elem=e5m2,rounding=stochastic")->spec(),
            "mxfp8:elem=e5m2,rounding=stochastic");
  EXPECT_EQ(make("mxfp4")->spec(), "mxfp4:rounding=nearest");
  EXPECT_EQ(make("nvfp4:rounding=stochastic")->spec(), "nvfp4:rounding=stochastic");
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec("mxfp8:elem=e3m4", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("elem"), std::string::npos) << last_error();
  EXPECT_EQ(create_codec("mxfp4:elem=e5m2", &codec), ncclInvalidArgument);
  EXPECT_EQ(create_codec("nvfp4:rounding=up", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("rounding"), std::string::npos) << last_error();
}

TEST_P(BlockScaled, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  const Case& c = GetParam();
  auto codec = make(c.spec);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (size_t count : {size_t(1), size_t(33), size_t(1000), size_t(100003)}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(count));
      std::vector<float> values = varied_input(count, 31 + count);
      if (dtype != DType::kFloat32) {
        for (float& v : values) v = std::fmod(v, 1000.0f);
      }
      const auto input = to_dtype(values, dtype);
      std::vector<float> host_error(count);
      EncodeContext context;
      context.seed = 99;
      context.error = host_error.data();
      const auto host_message = encode_host(*codec, input, dtype, context);
      context.error = nullptr;
      std::vector<uint8_t> device_message;
      std::vector<float> device_error;
      ASSERT_EQ(encode_device(*codec, input, dtype, context, &device_message, &device_error),
                ncclSuccess)
          << last_error();
      ASSERT_EQ(device_message, host_message);
      ASSERT_EQ(device_error.size(), host_error.size());
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(bits_of(device_error[i]), bits_of(host_error[i]));
      const auto initial = to_dtype(random_normal(count, 7), dtype);
      for (bool accumulate : {false, true}) {
        std::vector<float> device_output;
        ASSERT_EQ(
            decode_device(*codec, host_message, count, dtype, accumulate, initial, &device_output),
            ncclSuccess)
            << last_error();
        auto host_output = initial;
        ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(), count,
                                dtype, accumulate, DecodeContext{}),
                  ncclSuccess);
        ASSERT_EQ(device_output, from_dtype(host_output, dtype));
      }
    }
  }
}

TEST(BlockScaledGpu, DeviceEscapesNonFiniteAsTheHost) {
  TERSE_REQUIRE_GPU();
  for (const char* spec : {"mxfp8", "mxfp4", "nvfp4"}) {
    auto codec = make(spec);
    std::vector<float> x = random_normal(300, 12);
    x[70] = NAN;
    const std::vector<uint8_t> input = to_dtype(x, DType::kFloat32);
    std::vector<uint8_t> message;
    ASSERT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &message),
              ncclSuccess);
    EXPECT_EQ(message, encode_host(*codec, input, DType::kFloat32)) << spec;
    std::vector<float> out;
    ASSERT_EQ(decode_device(*codec, message, x.size(), DType::kFloat32, false, {}, &out),
              ncclSuccess)
        << spec << ": " << last_error();
    std::vector<float> expected = decode_host(*codec, message, x.size(), DType::kFloat32);
    EXPECT_TRUE(std::isnan(out[70])) << spec;
    out[70] = expected[70] = 0.0f;
    EXPECT_EQ(out, expected) << spec;
  }
}

}  // namespace
}  // namespace terse::testing
