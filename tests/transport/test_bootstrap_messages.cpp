#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "transport/bootstrap_messages.h"
#include "transport/peer_info.h"
#include "transport/wire_bytes.h"

namespace terse {
namespace {

TEST(BootstrapMessages, HelloRoundTrips) {
  BootstrapHello in;
  in.secret = 0xfedcba9876543210ull;
  in.rank = 7;
  in.nranks = 9;
  in.payload_bytes = 1234;
  std::vector<uint8_t> bytes = encode_hello(in);
  ASSERT_EQ(bytes.size(), kBootstrapHelloBytes);
  BootstrapHello out = decode_hello(bytes.data());
  EXPECT_EQ(out.magic, kBootstrapHelloMagic);
  EXPECT_EQ(out.version, kBootstrapVersion);
  EXPECT_EQ(out.secret, in.secret);
  EXPECT_EQ(out.rank, 7u);
  EXPECT_EQ(out.nranks, 9u);
  EXPECT_EQ(out.payload_bytes, 1234u);
}

TEST(BootstrapMessages, ReplyHeaderRoundTrips) {
  BootstrapReplyHeader in;
  in.status = ncclInvalidUsage;
  in.body_bytes = 1ull << 33;
  std::vector<uint8_t> bytes = encode_reply_header(in);
  ASSERT_EQ(bytes.size(), kBootstrapReplyHeaderBytes);
  BootstrapReplyHeader out = decode_reply_header(bytes.data());
  EXPECT_EQ(out.magic, kBootstrapReplyMagic);
  EXPECT_EQ(out.status, ncclInvalidUsage);
  EXPECT_EQ(out.body_bytes, 1ull << 33);
}

TEST(BootstrapMessages, PayloadTableRoundTripsAndRefusesMalformedBodies) {
  std::vector<std::vector<uint8_t>> in = {{}, {1}, std::vector<uint8_t>(1000, 7), {4, 5, 6}};
  std::vector<uint8_t> body = encode_payload_table(in);
  std::vector<std::vector<uint8_t>> out;
  ASSERT_TRUE(decode_payload_table(body, 4, &out));
  EXPECT_EQ(out, in);
  EXPECT_FALSE(decode_payload_table(body, 5, &out));  // too few entries
  EXPECT_FALSE(decode_payload_table(body, 3, &out));  // bytes left over
  for (size_t cut = 0; cut < body.size(); cut += 97) {
    std::vector<uint8_t> truncated(body.begin(), body.begin() + cut);
    EXPECT_FALSE(decode_payload_table(truncated, 4, &out)) << cut;
  }
  std::vector<uint8_t> huge;
  ByteWriter(&huge).u32(0xffffffffu);
  EXPECT_FALSE(decode_payload_table(huge, 1, &out));
}

TEST(PeerInfo, RoundTripsAndRefusesMalformedBytes) {
  PeerInfo in{"node7:805d5149",
              {1, 2, 3, 4, 5},
              {9, 8, 7},
              {"boot:pidns=4/4026531836", 4242, 987654321012}};
  std::vector<uint8_t> bytes = encode_peer_info(in);
  PeerInfo out;
  ASSERT_EQ(decode_peer_info(bytes, 3, &out), ncclSuccess);
  EXPECT_EQ(out.host_identity, in.host_identity);
  EXPECT_EQ(out.worker_address, in.worker_address);
  EXPECT_EQ(out.local_worker_address, in.local_worker_address);
  EXPECT_EQ(out.process.process_space, in.process.process_space);
  EXPECT_EQ(out.process.pid, in.process.pid);
  EXPECT_EQ(out.process.start_time, in.process.start_time);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    EXPECT_EQ(decode_peer_info(truncated, 3, &out), ncclRemoteError) << cut;
  }
  EXPECT_NE(std::string(last_error()).find("rank 3"), std::string::npos);
  bytes.push_back(0);
  EXPECT_EQ(decode_peer_info(bytes, 3, &out), ncclRemoteError);
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
