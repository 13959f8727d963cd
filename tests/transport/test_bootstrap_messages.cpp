#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/bootstrap_messages.h"
#include "transport/peer_info.h"
#include "transport/wire_bytes.h"

namespace terse {
namespace {

TEST(BootstrapMessages, ChallengeRoundTrips) {
  BootstrapChallenge in;
  for (size_t i = 0; i < kBootstrapNonceBytes; ++i) in.nonce[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<uint8_t> bytes = encode_challenge(in);
  ASSERT_EQ(bytes.size(), kBootstrapChallengeBytes);
  BootstrapChallenge out = decode_challenge(bytes.data());
  EXPECT_EQ(out.magic, kBootstrapChallengeMagic);
  EXPECT_EQ(out.version, kBootstrapVersion);
  EXPECT_EQ(memcmp(out.nonce, in.nonce, kBootstrapNonceBytes), 0);
}

TEST(BootstrapMessages, HelloRoundTrips) {
  BootstrapHello in;
  in.rank = 7;
  in.nranks = 9;
  in.payload_bytes = 1234;
  for (size_t i = 0; i < kBootstrapMacBytes; ++i) in.mac[i] = static_cast<uint8_t>(255 - i);
  std::vector<uint8_t> bytes = encode_hello(in);
  ASSERT_EQ(bytes.size(), kBootstrapHelloBytes);
  BootstrapHello out = decode_hello(bytes.data());
  EXPECT_EQ(out.magic, kBootstrapHelloMagic);
  EXPECT_EQ(out.version, kBootstrapVersion);
  EXPECT_EQ(out.rank, 7u);
  EXPECT_EQ(out.nranks, 9u);
  EXPECT_EQ(out.payload_bytes, 1234u);
  EXPECT_EQ(memcmp(out.mac, in.mac, kBootstrapMacBytes), 0);
  EXPECT_EQ(check_hello_header(out), "");
}

TEST(BootstrapMessages, HelloHeaderBoundsAreCheckedBeforeThePayload) {
  BootstrapHello hello;
  hello.rank = 0;
  hello.nranks = 65536;
  hello.payload_bytes = 64 * 1024;
  EXPECT_EQ(check_hello_header(hello), "");  // both limits are inclusive
  BootstrapHello too_many = hello;
  too_many.nranks = 65537;
  EXPECT_NE(check_hello_header(too_many).find("nranks 65537"), std::string::npos);
  BootstrapHello none = hello;
  none.nranks = 0;
  EXPECT_NE(check_hello_header(none), "");
  BootstrapHello outside = hello;
  outside.rank = 65536;
  EXPECT_NE(check_hello_header(outside).find("rank 65536"), std::string::npos);
  BootstrapHello big = hello;
  big.payload_bytes = 64 * 1024 + 1;
  EXPECT_NE(check_hello_header(big).find("65537-byte payload"), std::string::npos);
  BootstrapHello magic = hello;
  magic.magic ^= 1;
  EXPECT_NE(check_hello_header(magic), "");
  BootstrapHello version = hello;
  version.version = 1;  // the unauthenticated hello of the first bootstrap
  EXPECT_NE(check_hello_header(version).find("version 1"), std::string::npos);
}

TEST(BootstrapMessages, ReplyHeaderRoundTripsAndIsBounded) {
  BootstrapReplyHeader in;
  in.status = Result::kInvalidUsage.code();
  in.body_bytes = 1ull << 33;
  std::vector<uint8_t> bytes = encode_reply_header(in);
  ASSERT_EQ(bytes.size(), kBootstrapReplyHeaderBytes);
  BootstrapReplyHeader out = decode_reply_header(bytes.data());
  EXPECT_EQ(out.magic, kBootstrapReplyMagic);
  EXPECT_EQ(out.status, static_cast<uint32_t>(Result::kInvalidUsage.code()));
  EXPECT_EQ(out.body_bytes, 1ull << 33);
  // An error sentence is at most 4 KiB; a table at most nranks full payloads with lengths.
  EXPECT_NE(check_reply_header(out, 4), "");
  out.body_bytes = kMaxBootstrapErrorBytes;
  EXPECT_EQ(check_reply_header(out, 4), "");
  out.status = Result::kSuccess.code();
  out.body_bytes = 2ull * (4 + kMaxBootstrapPayloadBytes);
  EXPECT_EQ(check_reply_header(out, 2), "");
  out.body_bytes += 1;
  EXPECT_NE(check_reply_header(out, 2), "");
  out.status = 1000;
  out.body_bytes = 0;
  EXPECT_NE(check_reply_header(out, 2).find("unknown status 1000"), std::string::npos);
}

TEST(BootstrapMessages, PayloadTableRoundTripsAndRefusesMalformedBodies) {
  std::vector<std::vector<uint8_t>> in = {{}, {1}, std::vector<uint8_t>(1000, 7), {4, 5, 6}};
  std::vector<uint8_t> body = encode_payload_table(in);
  std::vector<std::vector<uint8_t>> out;
  ASSERT_TRUE(decode_payload_table(body.data(), body.size(), 4, &out));
  EXPECT_EQ(out, in);
  EXPECT_FALSE(decode_payload_table(body.data(), body.size(), 5, &out));  // too few entries
  EXPECT_FALSE(decode_payload_table(body.data(), body.size(), 3, &out));  // bytes left over
  for (size_t cut = 0; cut < body.size(); cut += 97) {
    EXPECT_FALSE(decode_payload_table(body.data(), cut, 4, &out)) << cut;
  }
  std::vector<uint8_t> huge;
  ByteWriter(&huge).u32(0xffffffffu);
  EXPECT_FALSE(decode_payload_table(huge.data(), huge.size(), 1, &out));
  EXPECT_FALSE(decode_payload_table(body.data(), body.size(), kMaxBootstrapRanks + 1, &out));
}

TEST(PeerInfo, RoundTripsAndRefusesMalformedBytes) {
  PeerInfo in{"node7:805d5149",
              {1, 2, 3, 4, 5},
              {9, 8, 7},
              {"boot:pidns=4/4026531836", 4242, 987654321012}};
  std::vector<uint8_t> bytes = encode_peer_info(in);
  PeerInfo out;
  ASSERT_EQ(decode_peer_info(bytes, 3, &out), Result::kSuccess);
  EXPECT_EQ(out.host_identity, in.host_identity);
  EXPECT_EQ(out.worker_address, in.worker_address);
  EXPECT_EQ(out.local_worker_address, in.local_worker_address);
  EXPECT_EQ(out.process.process_space, in.process.process_space);
  EXPECT_EQ(out.process.pid, in.process.pid);
  EXPECT_EQ(out.process.start_time, in.process.start_time);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    EXPECT_EQ(decode_peer_info(truncated, 3, &out), Result::kRemoteError) << cut;
  }
  EXPECT_NE(std::string(last_error()).find("rank 3"), std::string::npos);
  bytes.push_back(0);
  EXPECT_EQ(decode_peer_info(bytes, 3, &out), Result::kRemoteError);
}

TEST(WireBytes, LittleEndianAndBoundsChecked) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u16(0x0102);
  writer.u32(0x03040506);
  writer.u64(0x0708090a0b0c0d0eull);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{2, 1, 6, 5, 4, 3, 0xe, 0xd, 0xc, 0xb, 0xa, 9, 8, 7}));
  ByteReader reader(bytes.data(), bytes.size());
  uint16_t a = 0;
  uint32_t b = 0;
  uint64_t c = 0;
  EXPECT_TRUE(reader.u16(&a));
  EXPECT_TRUE(reader.u32(&b));
  EXPECT_TRUE(reader.u64(&c));
  EXPECT_EQ(a, 0x0102);
  EXPECT_EQ(b, 0x03040506u);
  EXPECT_EQ(c, 0x0708090a0b0c0d0eull);
  EXPECT_FALSE(reader.u16(&a));
  ByteReader short_reader(bytes.data(), 3);
  EXPECT_FALSE(short_reader.u32(&b));
  EXPECT_EQ(short_reader.remaining(), 3u);
}

}  // namespace
}  // namespace terse
