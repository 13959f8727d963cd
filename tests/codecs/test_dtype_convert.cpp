// dtype_convert.h's bulk conversions against independent references (float16_reference.h):
// every fp16 and bf16 bit pattern read as fp32; to fp16 and bf16, every fp32 pattern of the top
// 16 bits with low halves that decide the rounding (ties either side of an even or odd last kept
// bit, just above and below them, the extremes and random ones), NaNs and infinities included;
// saturation and accumulation as the decoders apply them; and short lengths at odd offsets, which
// leave tails for the per-element code. The functions must equal the per-element code of dtype.h
// too, which they replace (checked on the same inputs). fp8 reads are checked against the
// per-element code for all 256 codes (test_fp8_inputs.cpp checks that against the specification).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codecs/dtype_convert.h"
#include "float16_reference.h"

namespace terse::testing {
namespace {

std::vector<uint16_t> every_16_bit_pattern() {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t i = 0; i < 0x10000u; ++i) all[i] = static_cast<uint16_t>(i);
  return all;
}

// Every top half with each of these low halves (bits 12 and 13 decide fp16's normal rounding,
// bit 15 bf16's).
std::vector<float> rounding_floats() {
  std::mt19937_64 rng(11);
  std::vector<float> all;
  for (uint32_t top = 0; top < 0x10000u; ++top) {
    for (uint32_t low :
         {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu, 0x2000u, 0x2fffu, 0x3000u, 0x3001u,
          0x7fffu, 0x8000u, 0x8001u, 0xefffu, 0xffffu, static_cast<uint32_t>(rng() & 0xffffu)}) {
      all.push_back(reference_float((top << 16) | low));
    }
  }
  return all;
}

TEST(DtypeConvert, ReadsEveryHalfAndBfloat16Pattern) {
  const std::vector<uint16_t> all = every_16_bit_pattern();
  std::vector<float> out(all.size());
  load_floats<F16>(all.data(), all.size(), out.data());
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    ASSERT_EQ(reference_bits(out[i]), reference_bits(reference_half_to_float(all[i])))
        << "half 0x" << std::hex << i;
    ASSERT_EQ(reference_bits(out[i]), reference_bits(half_to_float(all[i]))) << std::hex << i;
  }
  load_floats<BF16>(all.data(), all.size(), out.data());
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    ASSERT_EQ(reference_bits(out[i]), reference_bits(reference_bf16_to_float(all[i])))
        << "bf16 0x" << std::hex << i;
  }
}

TEST(DtypeConvert, ReadsEveryFp8Code) {
  std::vector<uint8_t> all(256);
  for (uint32_t i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  std::vector<float> out(256);
  load_floats<F8E4M3>(all.data(), all.size(), out.data());
  for (uint32_t i = 0; i < 256; ++i) {
    ASSERT_EQ(reference_bits(out[i]),
              reference_bits(load_element(all.data(), DType::kFloat8E4M3, i)));
  }
  load_floats<F8E5M2>(all.data(), all.size(), out.data());
  for (uint32_t i = 0; i < 256; ++i) {
    ASSERT_EQ(reference_bits(out[i]),
              reference_bits(load_element(all.data(), DType::kFloat8E5M2, i)));
  }
}

// What store_floats<Out, kSaturate, kAccumulate> must write for value v over old element `old`.
template <typename Out>
uint16_t expected_store(float v, uint16_t old, bool saturate, bool accumulate) {
  const bool half = Out::kType == DType::kFloat16;
  if (saturate) {
    const float limit = half ? 65504.0f : reference_float(0x7f7f0000u);
    v = v > limit ? limit : (v < -limit ? -limit : v);
  }
  if (accumulate) v = v + (half ? reference_half_to_float(old) : reference_bf16_to_float(old));
  return half ? reference_float_to_half(v) : reference_float_to_bf16(v);
}

template <typename Out, bool kSaturate, bool kAccumulate>
void check_stores(const std::vector<float>& values) {
  SCOPED_TRACE(std::string(dtype_name(Out::kType)) + (kSaturate ? " saturating" : "") +
               (kAccumulate ? " accumulating" : ""));
  // Old elements: every pattern, NaNs and infinities included, cycling.
  std::vector<uint16_t> old(values.size());
  for (size_t i = 0; i < old.size(); ++i) old[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<uint16_t> out = old;
  store_floats<Out, kSaturate, kAccumulate>(values.data(), values.size(), out.data());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(out[i], expected_store<Out>(values[i], old[i], kSaturate, kAccumulate))
        << "value 0x" << std::hex << reference_bits(values[i]) << " old 0x" << old[i];
    // The per-element code the codecs used to run.
    typename Out::Storage element = old[i];
    float v = kSaturate ? saturate_to<Out>(values[i]) : values[i];
    if (kAccumulate) v = v + Out::load(element);
    ASSERT_EQ(out[i], Out::store(v)) << "value 0x" << std::hex << reference_bits(values[i]);
  }
  // Short lengths at odd offsets: the tails and single vectors.
  for (size_t offset : {size_t(0), size_t(3), size_t(13)}) {
    for (size_t n = 0; n <= 20; ++n) {
      std::vector<uint16_t> part(old.begin() + offset, old.begin() + offset + n);
      store_floats<Out, kSaturate, kAccumulate>(values.data() + offset, n, part.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(part[i],
                  expected_store<Out>(values[offset + i], old[offset + i], kSaturate, kAccumulate))
            << "offset " << offset << " length " << n << " element " << i;
      }
    }
  }
}

TEST(DtypeConvert, WritesHalfAndBfloat16RoundingToNearestEven) {
  const std::vector<float> values = rounding_floats();
  check_stores<F16, false, false>(values);
  check_stores<F16, true, false>(values);
  check_stores<BF16, false, false>(values);
  check_stores<BF16, true, false>(values);
}

// Accumulation adds the old element (a decoded value is never NaN, so none here: which NaN a sum
// of two NaNs keeps is the compiler's choice of operand order, not the conversion's).
TEST(DtypeConvert, AccumulatesIntoHalfAndBfloat16) {
  std::vector<float> values;
  for (float v : rounding_floats()) {
    if (!std::isnan(v)) values.push_back(v);
  }
  check_stores<F16, false, true>(values);
  check_stores<F16, true, true>(values);
  check_stores<BF16, false, true>(values);
  check_stores<BF16, true, true>(values);
}

TEST(DtypeConvert, ReadsAtOddOffsetsAndLengths) {
  const std::vector<uint16_t> all = every_16_bit_pattern();
  for (size_t offset : {size_t(1), size_t(0x7bfc), size_t(0xfc00)}) {  // NaNs from 0x7c01
    for (size_t n = 0; n <= 20; ++n) {
      std::vector<float> half(n), bf16(n);
      load_floats<F16>(all.data() + offset, n, half.data());
      load_floats<BF16>(all.data() + offset, n, bf16.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(reference_bits(half[i]), reference_bits(reference_half_to_float(all[offset + i])))
            << "offset " << offset << " length " << n;
        ASSERT_EQ(reference_bits(bf16[i]),
                  reference_bits(reference_bf16_to_float(all[offset + i])));
      }
    }
  }
}

}  // namespace
}  // namespace terse::testing
