// lossless_codec.h alone: exact round trips of every small size and of large ones, the byte-plane
// split's inverse, compression of gradient-like fp32/bf16/fp16 bytes, and corrupt input refused
// without writing past the output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/float_convert.h"
#include "plugin/net/lossless_codec.h"

namespace terse::net {
namespace {

std::vector<uint8_t> gradient_bytes(size_t count, int element_bytes, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<uint8_t> bytes(count * element_bytes);
  for (size_t i = 0; i < count; ++i) {
    float value = normal(random);
    if (element_bytes == 4) {
      memcpy(&bytes[4 * i], &value, 4);
    } else {
      uint16_t bits =
          element_bytes == 2 && seed % 2 == 0 ? float_to_bf16(value) : float_to_half(value);
      memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  return bytes;
}

bool round_trips(LosslessCodec& codec, const std::vector<uint8_t>& input, size_t* encoded_size) {
  std::vector<uint8_t> encoded(LosslessCodec::bound(input.size()));
  size_t encoded_bytes = codec.encode(input.data(), input.size(), encoded.data(), encoded.size());
  if (encoded_bytes == 0) return false;
  std::vector<uint8_t> output(input.size() + 8, 0xAB);
  if (codec.decode(encoded.data(), encoded_bytes, output.data(), input.size()) != ncclSuccess) {
    return false;
  }
  for (size_t i = input.size(); i < output.size(); ++i) {
    if (output[i] != 0xAB) return false;
  }
  *encoded_size = encoded_bytes;
  return memcmp(output.data(), input.data(), input.size()) == 0;
}

TEST(LosslessCodec, PlanesSplitAndJoinBack) {
  for (size_t size : {0, 1, 3, 4, 5, 17, 4096, 4099}) {
    std::vector<uint8_t> in(size), planes(size), out(size);
    for (size_t i = 0; i < size; ++i) in[i] = static_cast<uint8_t>(i * 37 + 1);
    split_planes(in.data(), size, planes.data());
    if (size >= 8) {
      EXPECT_EQ(planes[1], in[4]) << size;  // plane 0 holds every 4th byte
    }
    join_planes(planes.data(), size, out.data());
    EXPECT_EQ(in, out) << size;
  }
}

TEST(LosslessCodec, EverySizeRoundTripsExactly) {
  LosslessCodec codec(1);
  std::mt19937 random(7);
  for (size_t size = 0; size <= 1100; ++size) {
    std::vector<uint8_t> input(size);
    for (auto& byte : input) byte = static_cast<uint8_t>(random());
    size_t encoded = 0;
    ASSERT_TRUE(round_trips(codec, input, &encoded)) << size;
  }
  for (size_t size : {size_t{65537}, size_t{1} << 20, (size_t{4} << 20) + 3}) {
    std::vector<uint8_t> input = gradient_bytes(size / 2, 2, 4);
    input.push_back(1);
    size_t encoded = 0;
    ASSERT_TRUE(round_trips(codec, input, &encoded)) << size;
  }
}

TEST(LosslessCodec, GradientBytesShrinkInEveryFloatFormat) {
  LosslessCodec codec(1);
  struct Case {
    int element_bytes;
    uint32_t seed;  // even: bf16, odd: fp16 (for 2-byte elements)
    const char* name;
  };
  for (Case c : {Case{4, 1, "fp32"}, Case{2, 2, "bf16"}, Case{2, 3, "fp16"}}) {
    std::vector<uint8_t> input = gradient_bytes(1 << 20, c.element_bytes, c.seed);
    size_t encoded = 0;
    ASSERT_TRUE(round_trips(codec, input, &encoded)) << c.name;
    EXPECT_LT(encoded, input.size() * 95 / 100) << c.name;
  }
}

TEST(LosslessCodec, CorruptInputIsRefusedWithinBounds) {
  LosslessCodec codec(1);
  std::vector<uint8_t> input = gradient_bytes(4096, 2, 2);
  std::vector<uint8_t> encoded(LosslessCodec::bound(input.size()));
  size_t size = codec.encode(input.data(), input.size(), encoded.data(), encoded.size());
  ASSERT_GT(size, 0u);
  std::vector<uint8_t> output(input.size() + 8, 0xCD);
  // Announcing another raw size, truncated, and flipped bytes: refused, nothing past the end.
  EXPECT_EQ(codec.decode(encoded.data(), size, output.data(), input.size() - 1), ncclRemoteError);
  EXPECT_EQ(codec.decode(encoded.data(), size / 2, output.data(), input.size()), ncclRemoteError);
  std::mt19937 random(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> broken(encoded.begin(), encoded.begin() + size);
    broken[random() % size] ^= static_cast<uint8_t>(1 + random() % 255);
    codec.decode(broken.data(), broken.size(), output.data(), input.size());
    for (size_t i = input.size(); i < output.size(); ++i) ASSERT_EQ(output[i], 0xCD);
  }
}

}  // namespace
}  // namespace terse::net
