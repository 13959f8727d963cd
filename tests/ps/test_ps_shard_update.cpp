// The owner's update of a shard by a push (ps/shard_update.h: apply_push), on its own: each rule
// and element type against sums the test works out itself (exact sums, and fp16/bf16 halfway
// cases written as bit patterns), and a compressed push that decodes or is refused.
#include "ps/shard_update.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/codec_registry.h"

namespace terse {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> values_of(const std::vector<uint8_t>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// An exact push (no codec) of `values` by `rule` into `shard`; what apply_push returns.
template <typename T>
ncclResult_t push(uint8_t rule, const std::vector<T>& values, ncclDataType_t type,
                  std::vector<uint8_t>* shard, std::string* why) {
  const std::vector<uint8_t> payload = bytes_of(values);
  return apply_push(rule, PsEncoding::kRaw, payload.data(), payload.size(), nullptr,
                    DType::kFloat32, type, values.size(), shard->data(), shard->size(), why);
}

TEST(PsShardUpdate, ZeroClearsTheShard) {
  std::vector<uint8_t> shard = bytes_of(std::vector<float>{1.5f, -2.0f, 3.0f});
  std::string why;
  EXPECT_EQ(apply_push(0, PsEncoding::kRaw, nullptr, 0, nullptr, DType::kFloat32, ncclFloat32, 3,
                       shard.data(), shard.size(), &why),
            ncclSuccess);
  EXPECT_EQ(shard, std::vector<uint8_t>(12, 0));
  EXPECT_EQ(why, "");
}

TEST(PsShardUpdate, CopyOverwritesTheShard) {
  std::vector<uint8_t> shard = bytes_of(std::vector<float>{1.5f, -2.0f, 3.0f});
  const std::vector<float> pushed = {7.0f, 0.25f, -1e30f};
  std::string why;
  EXPECT_EQ(push(1, pushed, ncclFloat32, &shard, &why), ncclSuccess);
  EXPECT_EQ(values_of<float>(shard), pushed);
}

TEST(PsShardUpdate, AddSumsFp32AndFp64InTheirOwnPrecision) {
  const std::vector<float> held = {1.5f, -2.0f, 1e8f, 0.1f};
  const std::vector<float> pushed = {0.25f, 3.0f, 1.0f, 0.2f};
  std::vector<float> expected(held.size());
  for (size_t i = 0; i < held.size(); ++i) expected[i] = held[i] + pushed[i];
  std::vector<uint8_t> shard = bytes_of(held);
  std::string why;
  EXPECT_EQ(push(2, pushed, ncclFloat32, &shard, &why), ncclSuccess);
  EXPECT_EQ(values_of<float>(shard), expected);
  EXPECT_EQ(values_of<float>(shard)[2], 1e8f);  // 1e8 + 1 rounds back to 1e8 in fp32

  const std::vector<double> held64 = {1.5, -2.0, 1e8, 0.1};
  const std::vector<double> pushed64 = {0.25, 3.0, 1.0, 0.2};
  std::vector<double> expected64(held64.size());
  for (size_t i = 0; i < held64.size(); ++i) expected64[i] = held64[i] + pushed64[i];
  std::vector<uint8_t> shard64 = bytes_of(held64);
  EXPECT_EQ(push(2, pushed64, ncclFloat64, &shard64, &why), ncclSuccess);
  EXPECT_EQ(values_of<double>(shard64), expected64);
  EXPECT_EQ(values_of<double>(shard64)[2], 100000001.0);
}

// Half and bfloat16 as bit patterns: 1.5 + 2.25 = 3.75 exactly; 1 + half an ulp is a tie that
// rounds to the even 1; 1 + one ulp is the next value up.
TEST(PsShardUpdate, AddRoundsFp16AndBf16SumsToNearestEven) {
  std::vector<uint8_t> half = bytes_of(std::vector<uint16_t>{0x3E00, 0x3C00, 0x3C00});
  std::string why;
  EXPECT_EQ(push(2, std::vector<uint16_t>{0x4080, 0x1000, 0x1400}, ncclFloat16, &half, &why),
            ncclSuccess);
  EXPECT_EQ(values_of<uint16_t>(half), (std::vector<uint16_t>{0x4380, 0x3C00, 0x3C01}));

  std::vector<uint8_t> bf16 = bytes_of(std::vector<uint16_t>{0x3FC0, 0x3F80, 0x3F80});
  EXPECT_EQ(push(2, std::vector<uint16_t>{0x4010, 0x3B80, 0x3C00}, ncclBfloat16, &bf16, &why),
            ncclSuccess);
  EXPECT_EQ(values_of<uint16_t>(bf16), (std::vector<uint16_t>{0x4070, 0x3F80, 0x3F81}));
}

// A compressed add: the fp16 cast carries these values exactly, so the shard gains their sum.
TEST(PsShardUpdate, AddDecodesACompressedPushIntoTheShard) {
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec("fp16", &codec), ncclSuccess);
  const std::vector<float> held = {1.5f, -2.0f, 4.0f};
  const std::vector<float> pushed = {0.25f, 3.0f, -0.5f};
  std::vector<float> expected(held.size());
  for (size_t i = 0; i < held.size(); ++i) expected[i] = held[i] + pushed[i];
  std::vector<uint8_t> message(codec->max_encoded_bytes(pushed.size(), DType::kFloat32));
  size_t message_bytes = 0;
  ASSERT_EQ(codec->encode(pushed.data(), pushed.size(), DType::kFloat32, EncodeContext{},
                          message.data(), message.size(), &message_bytes),
            ncclSuccess);
  std::vector<uint8_t> shard = bytes_of(held);
  std::string why;
  EXPECT_EQ(apply_push(2, PsEncoding::kCodec, message.data(), message_bytes, codec.get(),
                       DType::kFloat32, ncclFloat32, held.size(), shard.data(), shard.size(), &why),
            ncclSuccess)
      << why;
  EXPECT_EQ(values_of<float>(shard), expected);

  // Cut short, the message does not decode: refused, and the shard is left as it was.
  const std::vector<uint8_t> before = shard;
  EXPECT_EQ(apply_push(2, PsEncoding::kCodec, message.data(), message_bytes - 1, codec.get(),
                       DType::kFloat32, ncclFloat32, held.size(), shard.data(), shard.size(), &why),
            ncclInvalidArgument);
  EXPECT_EQ(why.rfind("the compressed push did not decode: ", 0), 0u) << why;
  EXPECT_EQ(shard, before);
}

}  // namespace
}  // namespace terse
