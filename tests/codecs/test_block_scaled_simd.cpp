// The SIMD kernels of the block-scaled codecs (block_scaled_avx2.h, block_scaled_avx512.h)
// against the generic loops of block_scaled_cpu.h, on random tensors of every magnitude with
// zeros, NaNs and infinities: the same scale bytes and codes, the same first non-finite block,
// the same decoded values. The AVX2 encoders are called directly, so that they are checked on
// machines whose codec calls take the AVX-512 ones. (The error output is checked against the
// specification reference in test_block_scaled.cpp.) Compiled with -ffp-contract=off, as the
// library is (tests/CMakeLists.txt): the linker keeps one copy of the templates for both.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codecs/block_scaled_cpu.h"

namespace terse::testing {
namespace {

#if TERSE_BLOCK_SCALED_AVX2

std::vector<float> random_tensor(std::mt19937_64& rng, int kind) {
  std::vector<float> x(1 + rng() % 5000);
  std::normal_distribution<float> normal;
  for (float& v : x) {
    const int exponent = int(rng() % 60) - 30 + (kind == 1 ? 90 : 0) - (kind == 2 ? 110 : 0);
    v = std::ldexp(normal(rng), exponent);
    if (kind == 3 && rng() % 997 == 0) v = rng() % 2 != 0 ? NAN : INFINITY;
    if (kind == 4 && rng() % 7 == 0) v = 0.0f;
  }
  return x;
}

// The AVX2 kernels over the whole tensor, split as the entry points split it.
template <typename F, bool kStochastic>
size_t mx_encode_avx2(const std::vector<float>& x, uint64_t seed, uint8_t* payload) {
  const BlockScaledLayout layout = block_scaled_layout(x.size(), kMxBlock, F::kBits);
  const auto range = [&](size_t begin, size_t end) {
    return mx_encode_range<F32, F, kStochastic>(x.data(), x.size(), seed, begin, end, payload,
                                                nullptr);
  };
  const auto simd = [&](size_t begin, size_t end) {
    return block_scaled_avx2::mx_encode<F, kStochastic, false>(x.data() + begin * kMxBlock, begin,
                                                               end, rounding_key(seed), payload,
                                                               payload + layout.codes, nullptr);
  };
  return block_scaled_encode_split(layout.blocks, block_scaled_simd_blocks(x.size(), kMxBlock),
                                   simd, range);
}

template <bool kStochastic>
size_t nv_encode_avx2(const std::vector<float>& x, float tensor_scale, uint64_t seed,
                      uint8_t* payload) {
  const BlockScaledLayout layout = block_scaled_layout(x.size(), kNvBlock, 4);
  const auto range = [&](size_t begin, size_t end) {
    return nv_encode_range<F32, kStochastic>(x.data(), x.size(), tensor_scale, seed, begin, end,
                                             payload, nullptr);
  };
  const auto simd = [&](size_t begin, size_t end) {
    return block_scaled_avx2::nv_encode<kStochastic, false>(
        x.data() + begin * kNvBlock, begin, end, tensor_scale, rounding_key(seed), payload,
        payload + layout.codes, nullptr);
  };
  const size_t simd_blocks =
      block_scaled_is_finite(tensor_scale) ? block_scaled_simd_blocks(x.size(), kNvBlock) : 0;
  return block_scaled_encode_split(layout.blocks, simd_blocks, simd, range);
}

template <typename F, bool kStochastic>
void check_mx(const std::vector<float>& x) {
  const BlockScaledLayout layout = block_scaled_layout(x.size(), kMxBlock, F::kBits);
  std::vector<uint8_t> generic(layout.bytes), entry(layout.bytes), avx2(layout.bytes);
  const size_t bad = mx_encode_range<F32, F, kStochastic>(x.data(), x.size(), 7, 0, layout.blocks,
                                                          generic.data(), nullptr);
  ASSERT_EQ((mx_encode_cpu<F32, F, kStochastic>(x.data(), x.size(), 7, entry.data(), nullptr)),
            bad);
  ASSERT_EQ(generic, entry);
  if (block_scaled_avx2::available()) {
    ASSERT_EQ((mx_encode_avx2<F, kStochastic>(x, 7, avx2.data())), bad);
    ASSERT_EQ(generic, avx2);
  }
  if (bad < layout.blocks) return;  // not a message a decoder accepts
  std::vector<float> expected(x.size()), decoded(x.size());
  mx_decode_range<F32, F, false>(generic.data(), x.size(), 0, expected.data());
  mx_decode_cpu<F32, F, false>(generic.data(), x.size(), decoded.data());
  ASSERT_EQ(memcmp(expected.data(), decoded.data(), x.size() * sizeof(float)), 0);
}

template <bool kStochastic>
void check_nv(const std::vector<float>& x) {
  const BlockScaledLayout layout = block_scaled_layout(x.size(), kNvBlock, 4);
  const float tensor_scale =
      nv_tensor_scale(block_scaled_tensor_max_generic<F32>(x.data(), x.size()));
  const float entry_scale = nv_tensor_scale(block_scaled_tensor_max<F32>(x.data(), x.size()));
  ASSERT_EQ(memcmp(&tensor_scale, &entry_scale, sizeof(float)), 0);
  std::vector<uint8_t> generic(layout.bytes), entry(layout.bytes), avx2(layout.bytes);
  const size_t bad = nv_encode_range<F32, kStochastic>(x.data(), x.size(), tensor_scale, 7, 0,
                                                       layout.blocks, generic.data(), nullptr);
  const size_t entry_bad =
      nv_encode_cpu<F32, kStochastic>(x.data(), x.size(), tensor_scale, 7, entry.data(), nullptr);
  ASSERT_EQ(entry_bad, bad);
  ASSERT_EQ(generic, entry);
  if (block_scaled_avx2::available()) {
    ASSERT_EQ((nv_encode_avx2<kStochastic>(x, tensor_scale, 7, avx2.data())), bad);
    ASSERT_EQ(generic, avx2);
  }
  if (bad < layout.blocks) return;
  std::vector<float> expected(x.size()), decoded(x.size());
  nv_decode_range<F32, false>(generic.data(), x.size(), tensor_scale, 0, expected.data());
  nv_decode_cpu<F32, false>(generic.data(), x.size(), tensor_scale, decoded.data());
  ASSERT_EQ(memcmp(expected.data(), decoded.data(), x.size() * sizeof(float)), 0);
}

TEST(BlockScaledSimd, KernelsEqualTheGenericLoops) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<float> x = random_tensor(rng, trial % 5);
    SCOPED_TRACE(std::to_string(trial) + ": " + std::to_string(x.size()) + " elements");
    check_mx<E4M3, false>(x);
    check_mx<E4M3, true>(x);
    check_mx<E5M2, false>(x);
    check_mx<E5M2, true>(x);
    check_mx<E2M1, false>(x);
    check_mx<E2M1, true>(x);
    check_nv<false>(x);
    check_nv<true>(x);
  }
}

// nvfp4's block scales through every E4M3 code: under tensor scale 1 (a block maximum of 2688),
// blocks whose maxima are 6 times each E4M3 value, the midpoints between neighbours (ties), and
// the values just beside them, with the rest of each block random below its maximum.
TEST(BlockScaledSimd, EveryNvfp4BlockScaleEqualsTheGenericLoops) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> fraction(-1.0f, 1.0f);
  std::vector<float> maxima = {2688.0f};
  for (uint32_t code = 0; code < 0x7e; ++code) {
    const float v = minifloat_value<E4M3>(code), next = minifloat_value<E4M3>(code + 1);
    const float mid = 6.0f * (v + (next - v) / 2);
    for (float m : {6.0f * v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      maxima.push_back(m);
    }
  }
  std::vector<float> x;
  for (float m : maxima) {
    for (uint32_t j = 0; j < kNvBlock; ++j) x.push_back(j == 7 ? -m : m * fraction(rng));
  }
  while (x.size() % (kNvBlock * block_scaled_avx2::kGroup) != 0) x.push_back(0.0f);
  check_nv<false>(x);
  check_nv<true>(x);
}

// Stochastic rounding exactly at its decision point: an element whose fraction t - floor(t) (t
// its magnitude in quanta) equals 1 - u for its own draw u rounds up, one 2^-24 below it rounds
// down (minifloat.h). The SIMD kernels decide this in integers (block_scaled_avx2.h's
// magnitude_code); the inputs are built in the subnormal binade, where t < 1 is exact, with each
// block's scale a power of two, and the expected code is the construction's.
struct BoundaryCase {
  std::vector<float> x;
  std::vector<uint32_t> expected;  // element codes where known (kUnknown elsewhere)
};
constexpr uint32_t kUnknown = 0xffffffffu;

// Blocks of `block` elements; element 0 of each is `anchor` (it sets the block's scale), the others
// are t * `quantum` with t = 1 - u or 1 - u - 2^-24, alternating, and alternating signs.
BoundaryCase boundary_case(size_t count, uint32_t block, float anchor, float quantum,
                           uint32_t sign_bit, uint64_t seed) {
  BoundaryCase c;
  c.x.resize(count);
  c.expected.assign(count, kUnknown);
  const RoundingKey key = rounding_key(seed);
  for (size_t i = 0; i < count; ++i) {
    if (i % block == 0) {
      c.x[i] = anchor;
      continue;
    }
    const uint32_t r = static_cast<uint32_t>(rounding_uniform(key, uint64_t(i)) * 0x1p24f);
    const bool up = i % 2 == 0;
    const uint32_t steps = (1u << 24) - r - (up ? 0u : 1u);  // t * 2^24
    if (r == 0 || steps == 0) {
      c.x[i] = 0.0f;
      c.expected[i] = 0;
      continue;
    }
    const bool negative = i % 4 >= 2;
    c.x[i] = (negative ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(steps), -24) * quantum;
    c.expected[i] = (negative ? sign_bit : 0u) | (up ? 1u : 0u);
  }
  return c;
}

template <typename F>
void expect_codes(const std::vector<uint8_t>& payload, size_t codes_offset, const BoundaryCase& c,
                  const char* path) {
  for (size_t i = 0; i < c.x.size(); ++i) {
    if (c.expected[i] == kUnknown) continue;
    const uint32_t code = F::kBits == 8 ? payload[codes_offset + i]
                                        : (payload[codes_offset + i / 2] >> (4 * (i % 2))) & 0xfu;
    ASSERT_EQ(code, c.expected[i]) << path << ": element " << i << " = " << c.x[i];
  }
}

template <typename F>
void check_mx_boundary(float anchor, float quantum) {
  const size_t count = 1024;
  const BoundaryCase c = boundary_case(count, kMxBlock, anchor, quantum, F::kSignBit, 7);
  const BlockScaledLayout layout = block_scaled_layout(count, kMxBlock, F::kBits);
  std::vector<uint8_t> generic(layout.bytes), entry(layout.bytes), avx2(layout.bytes);
  mx_encode_range<F32, F, true>(c.x.data(), count, 7, 0, layout.blocks, generic.data(), nullptr);
  expect_codes<F>(generic, layout.codes, c, "generic");
  mx_encode_cpu<F32, F, true>(c.x.data(), count, 7, entry.data(), nullptr);
  expect_codes<F>(entry, layout.codes, c, "entry point");
  if (block_scaled_avx2::available()) {
    mx_encode_avx2<F, true>(c.x, 7, avx2.data());
    expect_codes<F>(avx2, layout.codes, c, "AVX2");
  }
}

TEST(BlockScaledSimd, StochasticRoundingDecidesExactlyAtOneMinusU) {
  // Block maxima 6, 448 and 57344 give the MX scale 2^0; the subnormal quantum is then 2^-1
  // (E2M1), 2^-9 (E4M3), 2^-16 (E5M2).
  check_mx_boundary<E2M1>(6.0f, 0.5f);
  check_mx_boundary<E4M3>(448.0f, 0x1p-9f);
  check_mx_boundary<E5M2>(57344.0f, 0x1p-16f);
  // nvfp4: element 0 = 2688 makes the tensor scale 1; the other blocks' maxima 1536 give the
  // block scale 256 (an E4M3 power of two), so |x| / 256 is exact and the quantum is 2^-1 * 256.
  const size_t count = 1024;
  BoundaryCase c = boundary_case(count, kNvBlock, 1536.0f, 128.0f, E2M1::kSignBit, 7);
  c.x[0] = 2688.0f;  // and block 0's scale with it: its codes are not the construction's
  for (size_t i = 0; i < kNvBlock; ++i) c.expected[i] = kUnknown;
  const float tensor_scale =
      nv_tensor_scale(block_scaled_tensor_max_generic<F32>(c.x.data(), count));
  ASSERT_EQ(tensor_scale, 1.0f);
  const BlockScaledLayout layout = block_scaled_layout(count, kNvBlock, 4);
  std::vector<uint8_t> generic(layout.bytes), entry(layout.bytes), avx2(layout.bytes);
  nv_encode_range<F32, true>(c.x.data(), count, tensor_scale, 7, 0, layout.blocks, generic.data(),
                             nullptr);
  expect_codes<E2M1>(generic, layout.codes, c, "generic");
  nv_encode_cpu<F32, true>(c.x.data(), count, tensor_scale, 7, entry.data(), nullptr);
  expect_codes<E2M1>(entry, layout.codes, c, "entry point");
  if (block_scaled_avx2::available()) {
    nv_encode_avx2<true>(c.x, tensor_scale, 7, avx2.data());
    expect_codes<E2M1>(avx2, layout.codes, c, "AVX2");
  }
}

#endif  // TERSE_BLOCK_SCALED_AVX2

}  // namespace
}  // namespace terse::testing
