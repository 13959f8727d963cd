// Non-finite inputs through every codec (codec.h, nonfinite_escapes.h): a NaN or Inf at element i
// decodes as exactly that kind at i, every other element decodes bit for bit as if the input held
// zero at i, the error output is zero at i (a residual never holds a non-finite value), a finite
// input's message is unchanged, and the escape section has the documented layout. Also: finite
// extremes never decode to non-finite values, and malformed escape sections are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Every codec, with the parameter variants whose encode takes another path.
std::vector<std::string> specs() {
  std::vector<std::string> all;
  for (const CodecInfo& info : codec_table()) all.push_back(info.name);
  for (const char* variant :
       {"int8:rounding=stochastic", "int4:mode=absmax", "qsgd:norm=l2", "terngrad:clip=2",
        "randomk:shared_seed=false", "topk:method=exact", "dgc:warmup_steps=0,ratio=0.05"}) {
    all.push_back(variant);
  }
  return all;
}

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

bool escapes_flagged(const std::vector<uint8_t>& message) {
  WireHeader header;
  std::memcpy(&header, message.data(), sizeof(header));
  return (header.flags & kWireEscapesFlag) != 0;
}

// One encode with fresh state, the error output and the seed given.
struct Encoding {
  std::vector<uint8_t> message;
  std::vector<float> error;
  std::vector<float> decoded;
};

Encoding run(Codec& codec, const std::vector<uint8_t>& input, DType dtype, uint64_t seed) {
  const size_t count = input.size() / dtype_size(dtype);
  Encoding result;
  result.error.assign(count, -7.0f);
  auto state = codec.make_state(count, dtype, MatrixShape{});
  EncodeContext context;
  context.seed = seed;
  context.state = state.get();
  // DGC keeps its residual in its state (memory kind momentum) and takes no error output.
  if (codec.id() != CodecId::kDgc) {
    context.error = result.error.data();
  } else {
    result.error.assign(count, 0.0f);
  }
  result.message = encode_host(codec, input, dtype, context);
  result.decoded = decode_host(codec, result.message, count, dtype);
  return result;
}

// The test's own statement of which kind a value is, as the section codes it.
uint8_t kind_code(float v) {
  if (std::isnan(v)) return 3;
  return v > 0 ? 1 : 2;
}

class EveryCodecNonFinite : public ::testing::TestWithParam<std::string> {};

// The defining property: against the same encode of the input with zeros where it was not
// finite, everything but the escaped elements is bit-identical, and those decode exactly.
TEST_P(EveryCodecNonFinite, EscapedElementsTravelExactlyAndTheRestAsIfZero) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    // Few non-finite elements (the list form) and many (the map form).
    for (size_t every : {size_t{0}, size_t{3}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (every ? " many" : " few"));
      const size_t count = 4099;
      std::vector<float> values = random_normal(count, 41);
      std::vector<float> zeroed = values;
      std::vector<size_t> bad = {0, 700, 701, 4098};
      if (every != 0) {
        bad.clear();
        for (size_t i = 1; i < count; i += every) bad.push_back(i);
      }
      const float kinds[3] = {kInf, -kInf, kNaN};
      for (size_t b = 0; b < bad.size(); ++b) {
        values[bad[b]] = kinds[b % 3];
        zeroed[bad[b]] = 0.0f;
      }
      const Encoding poisoned = run(*codec, to_dtype(values, dtype), dtype, 9);
      const Encoding reference = run(*codec, to_dtype(zeroed, dtype), dtype, 9);
      EXPECT_TRUE(escapes_flagged(poisoned.message));
      EXPECT_FALSE(escapes_flagged(reference.message));
      std::vector<bool> is_bad(count, false);
      for (size_t i : bad) is_bad[i] = true;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(std::isfinite(poisoned.error[i])) << i;
        if (is_bad[i]) {
          ASSERT_EQ(poisoned.error[i], 0.0f) << i;
          ASSERT_EQ(kind_code(poisoned.decoded[i]), kind_code(values[i])) << i;
          ASSERT_FALSE(std::isfinite(poisoned.decoded[i])) << i;
        } else {
          ASSERT_EQ(float_bits(poisoned.error[i]), float_bits(reference.error[i])) << i;
          ASSERT_EQ(float_bits(poisoned.decoded[i]), float_bits(reference.decoded[i])) << i;
        }
      }
      // The message is the reference's bytes (flag aside) followed by the section.
      ASSERT_GT(poisoned.message.size(), reference.message.size());
      std::vector<uint8_t> head(poisoned.message.begin(),
                                poisoned.message.begin() + reference.message.size());
      head[offsetof(WireHeader, flags)] &= static_cast<uint8_t>(~kWireEscapesFlag);
      EXPECT_EQ(head, reference.message);
      EXPECT_LE(poisoned.message.size(), codec->max_encoded_bytes(count, dtype));
    }
  }
}

// Accumulating decodes add the escaped value: finite + Inf = Inf, -Inf + Inf = NaN, as NCCL's
// sum does.
TEST_P(EveryCodecNonFinite, AccumulatingAddsTheEscapedValues) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const size_t count = 600;
  std::vector<float> values = random_normal(count, 42);
  values[10] = kInf;
  values[20] = -kInf;
  values[30] = kNaN;
  values[40] = kInf;
  const Encoding poisoned = run(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32, 3);
  std::vector<float> output(count, 1.5f);
  output[40] = -kInf;
  ASSERT_EQ(codec->decode(poisoned.message.data(), poisoned.message.size(), output.data(), count,
                          DType::kFloat32, true, DecodeContext{}),
            ncclSuccess)
      << last_error();
  EXPECT_EQ(output[10], kInf);
  EXPECT_EQ(output[20], -kInf);
  EXPECT_TRUE(std::isnan(output[30]));
  EXPECT_TRUE(std::isnan(output[40]));
  for (size_t i = 0; i < count; ++i) {
    if (i % 10 == 0 && i >= 10 && i <= 40) continue;
    ASSERT_EQ(output[i], 1.5f + poisoned.decoded[i]) << i;
  }
}

// Finite inputs at the ends of each type's range never decode to a non-finite value, nor leave
// one in the error output (a cast must saturate, a scale or norm must not overflow).
TEST_P(EveryCodecNonFinite, FiniteExtremesStayFinite) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const float max = std::numeric_limits<float>::max();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const float top = dtype == DType::kFloat16    ? 65504.0f
                      : dtype == DType::kBFloat16 ? 3.38953139e38f  // bf16's largest, 0x7f7f
                                                  : max;
    const size_t count = 1024;
    std::vector<float> values = random_normal(count, 43);
    for (size_t i = 0; i < count; i += 2) values[i] = (i % 4 == 0 ? 1.0f : -1.0f) * top;
    for (size_t i = 1; i < count; i += 8) values[i] = top * 0.75f;
    const Encoding extreme = run(*codec, to_dtype(values, dtype), dtype, 5);
    EXPECT_FALSE(escapes_flagged(extreme.message));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(std::isfinite(extreme.decoded[i])) << i << " decoded " << extreme.decoded[i];
      ASSERT_TRUE(std::isfinite(extreme.error[i])) << i << " error " << extreme.error[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryCodecNonFinite, ::testing::ValuesIn(specs()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The section's bytes as nonfinite_escapes.h documents them, built here by hand.
std::vector<uint8_t> trailer(uint8_t form, uint64_t escapes) {
  std::vector<uint8_t> bytes = {'E', 'S', 'C', '1', form, 0, 0, 0};
  for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<uint8_t>(escapes >> (8 * b)));
  return bytes;
}

std::vector<uint8_t> section_of(const std::vector<uint8_t>& message, size_t finite_bytes) {
  return std::vector<uint8_t>(message.begin() + static_cast<std::ptrdiff_t>(finite_bytes),
                              message.end());
}

TEST(EscapeSection, FewEscapesAreAListOfIndicesThenKinds) {
  auto codec = make("none");
  std::vector<float> values(64, 1.0f);
  values[5] = kInf;
  values[9] = kNaN;
  values[63] = -kInf;
  const auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  std::vector<uint8_t> expected = {5, 0, 0, 0, 9, 0, 0, 0, 63, 0, 0, 0, 1, 3, 2};
  const auto tail = trailer(1, 3);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(section_of(message, kWireHeaderBytes + 64 * 4), expected);
}

TEST(EscapeSection, ManyEscapesAreATwoBitMap) {
  auto codec = make("none");
  // 16 elements: 4 map bytes; 1 escape would be 5 list bytes, so even one escape is a map.
  std::vector<float> values(16, 1.0f);
  values[0] = kInf;    // byte 0, bits 0-1: 1
  values[6] = kNaN;    // byte 1, bits 4-5: 3
  values[15] = -kInf;  // byte 3, bits 6-7: 2
  const auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  std::vector<uint8_t> expected = {0x01, 0x30, 0x00, 0x80};
  const auto tail = trailer(2, 3);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(section_of(message, kWireHeaderBytes + 16 * 4), expected);
}

TEST(EscapeSection, MalformedSectionsAreRefusedNamingTheEscapes) {
  auto codec = make("int8");
  std::vector<float> values = random_normal(256, 44);
  values[3] = kInf;
  values[100] = kNaN;
  const auto valid = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  const size_t section = valid.size() - 10 - 16;  // two list entries: 10 bytes, then the trailer
  std::vector<float> output(256);
  auto decode = [&](const std::vector<uint8_t>& message) {
    return codec->decode(message.data(), message.size(), output.data(), 256, DType::kFloat32, false,
                         DecodeContext{});
  };
  ASSERT_EQ(decode(valid), ncclSuccess) << last_error();
  struct Corruption {
    size_t at;
    uint8_t value;
    const char* says;
  };
  for (const Corruption& c : {Corruption{valid.size() - 16, 'X', "trailer is malformed"},
                              Corruption{valid.size() - 12, 7, "trailer is malformed"},
                              Corruption{valid.size() - 8, 0, "escapes 0 non-finite"},
                              Corruption{section + 4, 2, "out of order"},
                              Corruption{section + 1, 1, "out of order, out of range"},
                              Corruption{section + 9, 0, "of no known kind"}}) {
    std::vector<uint8_t> bad = valid;
    bad[c.at] = c.value;
    EXPECT_EQ(decode(bad), ncclInvalidArgument) << c.says;
    EXPECT_NE(std::string(last_error()).find(c.says), std::string::npos) << last_error();
  }
  // The flag without a section.
  std::vector<float> finite = random_normal(256, 45);
  auto plain = encode_host(*codec, to_dtype(finite, DType::kFloat32), DType::kFloat32);
  plain[offsetof(WireHeader, flags)] |= kWireEscapesFlag;
  EXPECT_EQ(decode(plain), ncclInvalidArgument);
}

}  // namespace
}  // namespace terse::testing
