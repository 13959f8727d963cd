// The owner's checks of what arrives from other processes (ps/ps_validation.h): every field of a
// crafted header that could make the server index or copy out of bounds, or apply something it
// does not know, is refused; the payload must be the announced one, whole and not stale.
#include "ps/ps_validation.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "codecs/codec_registry.h"

namespace terse {
namespace {

constexpr int kOwner = 1;
constexpr uint64_t kPrefix = sizeof(PsPayloadPrefix);

// A tensor of two shards of 10 fp32 elements: shard 0 owned by rank 0, shard 1 by kOwner (whose
// storage is the only one present, as on that owner).
std::shared_ptr<PsTensor> tensor_with_codec(const char* codec) {
  auto tensor = std::make_shared<PsTensor>();
  tensor->id = 7;
  tensor->name = "t";
  tensor->count = 20;
  tensor->element_bytes = 4;
  tensor->shards = {ShardSpan{0, 0, 10}, ShardSpan{kOwner, 10, 10}};
  tensor->storage.resize(2);
  tensor->storage[1].assign(40, 0);
  if (codec != nullptr) {
    EXPECT_EQ(create_codec(codec, &tensor->push_decoder), ncclSuccess);
  }
  return tensor;
}

PsRequestHeader send_header(uint8_t rule, uint64_t payload_bytes) {
  PsRequestHeader header;
  header.kind = uint8_t(PsRequestKind::kSend);
  header.rule = rule;
  header.tensor = 7;
  header.shard = 1;
  header.sequence = 42;
  header.payload_bytes = payload_bytes;
  return header;
}

struct Verdict {
  bool accepted;
  size_t payload_bytes;
  ncclResult_t refusal;
  std::string why;
};
Verdict judge(const PsRequestHeader& header, const PsTensor* tensor) {
  Verdict verdict{false, 99, ncclSuccess, ""};
  verdict.accepted = validate_request(header, tensor, kOwner, &verdict.payload_bytes,
                                      &verdict.refusal, &verdict.why);
  return verdict;
}

TEST(PsValidation, AcceptsWhatClientsSend) {
  auto tensor = tensor_with_codec("int8");
  Verdict v = judge(send_header(1, kPrefix + 40), tensor.get());
  EXPECT_TRUE(v.accepted) << v.why;
  EXPECT_EQ(v.payload_bytes, kPrefix + 40);
  v = judge(send_header(0, 0), tensor.get());
  EXPECT_TRUE(v.accepted) << v.why;
  EXPECT_EQ(v.payload_bytes, 0u);
  PsRequestHeader coded = send_header(2, kPrefix + 12);
  coded.encoding = uint8_t(PsEncoding::kCodec);
  v = judge(coded, tensor.get());
  EXPECT_TRUE(v.accepted) << v.why;
  PsRequestHeader receive = send_header(0, 0);
  receive.kind = uint8_t(PsRequestKind::kReceive);
  EXPECT_TRUE(judge(receive, tensor.get()).accepted);
}

// The header of the out-of-bounds write: an unknown tensor used to pass with no payload and be
// applied to whatever tensor had that id by then.
TEST(PsValidation, RefusesAnUnknownTensor) {
  const Verdict v = judge(send_header(1, kPrefix + 40), nullptr);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.refusal, ncclInvalidUsage);
  EXPECT_NE(v.why.find("not (or no longer) initialised"), std::string::npos) << v.why;
}

TEST(PsValidation, RefusesAShardOutOfRangeOrNotOwnedHere) {
  auto tensor = tensor_with_codec(nullptr);
  PsRequestHeader header = send_header(1, kPrefix + 40);
  header.shard = 2;
  EXPECT_FALSE(judge(header, tensor.get()).accepted);
  header.shard = 0xffffffffu;
  EXPECT_FALSE(judge(header, tensor.get()).accepted);
  header.shard = 0;  // rank 0's
  EXPECT_FALSE(judge(header, tensor.get()).accepted);
}

TEST(PsValidation, RefusesUnknownKindsRulesAndEncodings) {
  auto tensor = tensor_with_codec(nullptr);
  for (uint8_t rule : {uint8_t(3), uint8_t(255)}) {
    const Verdict v = judge(send_header(rule, kPrefix + 40), tensor.get());
    EXPECT_FALSE(v.accepted) << int(rule);
    EXPECT_EQ(v.refusal, ncclInvalidArgument);
    EXPECT_NE(v.why.find("rule"), std::string::npos) << v.why;
  }
  PsRequestHeader header = send_header(1, kPrefix + 40);
  header.encoding = 2;
  EXPECT_FALSE(judge(header, tensor.get()).accepted);
  header = send_header(1, kPrefix + 40);
  header.kind = 9;
  EXPECT_FALSE(judge(header, tensor.get()).accepted);
}

TEST(PsValidation, RefusesPayloadSizesThatDoNotFitTheShard) {
  auto tensor = tensor_with_codec("int8");
  EXPECT_FALSE(judge(send_header(1, 40), tensor.get()).accepted);  // no prefix
  EXPECT_FALSE(judge(send_header(1, kPrefix + 39), tensor.get()).accepted);
  EXPECT_FALSE(judge(send_header(2, kPrefix + 80), tensor.get()).accepted);
  EXPECT_FALSE(judge(send_header(0, kPrefix + 40), tensor.get()).accepted);  // zero with a payload
  PsRequestHeader coded = send_header(2, kPrefix + (uint64_t(1) << 40));
  coded.encoding = uint8_t(PsEncoding::kCodec);
  EXPECT_FALSE(judge(coded, tensor.get()).accepted);
  coded.payload_bytes = 3;  // shorter than the prefix
  EXPECT_FALSE(judge(coded, tensor.get()).accepted);
  PsRequestHeader receive = send_header(0, kPrefix + 40);
  receive.kind = uint8_t(PsRequestKind::kReceive);
  EXPECT_FALSE(judge(receive, tensor.get()).accepted);
  // A compressed copy, or compressed add to a tensor without a push codec.
  coded = send_header(1, kPrefix + 8);
  coded.encoding = uint8_t(PsEncoding::kCodec);
  EXPECT_FALSE(judge(coded, tensor.get()).accepted);
  auto exact = tensor_with_codec(nullptr);
  coded.rule = 2;
  EXPECT_FALSE(judge(coded, exact.get()).accepted);
}

TEST(PsValidation, APayloadMustBeWholeAndNotStale) {
  const PsRequestHeader header = send_header(1, kPrefix + 40);
  std::vector<uint8_t> payload(kPrefix + 40, 0);
  const PsPayloadPrefix prefix{42, 7};
  std::memcpy(payload.data(), &prefix, sizeof(prefix));
  std::string why;
  EXPECT_TRUE(validate_payload(header, payload.data(), payload.size(), &why)) << why;
  EXPECT_FALSE(validate_payload(header, payload.data(), payload.size() - 1, &why));
  EXPECT_NE(why.find("announced"), std::string::npos) << why;
  // The same tag after the sequence wrapped (42 + 2^19): a stale payload.
  const PsPayloadPrefix stale{42 + (1u << 19), 7};
  std::memcpy(payload.data(), &stale, sizeof(stale));
  EXPECT_FALSE(validate_payload(header, payload.data(), payload.size(), &why));
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
}

}  // namespace
}  // namespace terse
