#include "transport/bootstrap_messages.h"

#include <cstring>

#include "transport/wire_bytes.h"

namespace terse {
namespace {

// The header bytes a code covers: everything before the mac.
constexpr size_t kHelloSignedBytes = kBootstrapHelloBytes - kBootstrapMacBytes;
constexpr size_t kReplySignedBytes = kBootstrapReplyHeaderBytes - kBootstrapMacBytes;

bool known_status(uint32_t status) {
  // What a root sends: success, or the failures the rendezvous can report.
  return status <= static_cast<uint32_t>(Result::kInProgress.code());
}

}  // namespace

std::vector<uint8_t> encode_challenge(const BootstrapChallenge& challenge) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(challenge.magic);
  writer.u16(challenge.version);
  writer.u16(0);
  writer.bytes(challenge.nonce, sizeof(challenge.nonce));
  return bytes;
}

BootstrapChallenge decode_challenge(const uint8_t* bytes) {
  BootstrapChallenge challenge;
  ByteReader reader(bytes, kBootstrapChallengeBytes);
  uint16_t reserved = 0;
  const uint8_t* nonce = nullptr;
  reader.u32(&challenge.magic);
  reader.u16(&challenge.version);
  reader.u16(&reserved);
  reader.bytes(sizeof(challenge.nonce), &nonce);
  memcpy(challenge.nonce, nonce, sizeof(challenge.nonce));
  return challenge;
}

std::vector<uint8_t> encode_hello(const BootstrapHello& hello) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(hello.magic);
  writer.u16(hello.version);
  writer.u16(0);
  writer.u32(hello.rank);
  writer.u32(hello.nranks);
  writer.u32(hello.payload_bytes);
  writer.u32(0);
  writer.bytes(hello.mac, sizeof(hello.mac));
  return bytes;
}

BootstrapHello decode_hello(const uint8_t* bytes) {
  BootstrapHello hello;
  ByteReader reader(bytes, kBootstrapHelloBytes);
  uint16_t reserved16 = 0;
  uint32_t reserved32 = 0;
  const uint8_t* mac = nullptr;
  reader.u32(&hello.magic);
  reader.u16(&hello.version);
  reader.u16(&reserved16);
  reader.u32(&hello.rank);
  reader.u32(&hello.nranks);
  reader.u32(&hello.payload_bytes);
  reader.u32(&reserved32);
  reader.bytes(sizeof(hello.mac), &mac);
  memcpy(hello.mac, mac, sizeof(hello.mac));
  return hello;
}

std::vector<uint8_t> encode_reply_header(const BootstrapReplyHeader& header) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(header.magic);
  writer.u32(header.status);
  writer.u64(header.body_bytes);
  writer.bytes(header.mac, sizeof(header.mac));
  return bytes;
}

BootstrapReplyHeader decode_reply_header(const uint8_t* bytes) {
  BootstrapReplyHeader header;
  ByteReader reader(bytes, kBootstrapReplyHeaderBytes);
  const uint8_t* mac = nullptr;
  reader.u32(&header.magic);
  reader.u32(&header.status);
  reader.u64(&header.body_bytes);
  reader.bytes(sizeof(header.mac), &mac);
  memcpy(header.mac, mac, sizeof(header.mac));
  return header;
}

std::string check_hello_header(const BootstrapHello& hello) {
  if (hello.magic != kBootstrapHelloMagic) return "not a terse hello (wrong magic)";
  if (hello.version != kBootstrapVersion) {
    return "a hello of bootstrap version " + std::to_string(hello.version) + ", not " +
           std::to_string(kBootstrapVersion);
  }
  if (hello.nranks < 1 || hello.nranks > static_cast<uint32_t>(kMaxBootstrapRanks)) {
    return "nranks " + std::to_string(hello.nranks) + " is outside 1.." +
           std::to_string(kMaxBootstrapRanks);
  }
  if (hello.rank >= hello.nranks) {
    return "rank " + std::to_string(hello.rank) + " is not below nranks " +
           std::to_string(hello.nranks);
  }
  if (hello.payload_bytes > kMaxBootstrapPayloadBytes) {
    return "a " + std::to_string(hello.payload_bytes) + "-byte payload exceeds the " +
           std::to_string(kMaxBootstrapPayloadBytes) + "-byte limit";
  }
  return "";
}

std::string check_reply_header(const BootstrapReplyHeader& header, int nranks) {
  if (header.magic != kBootstrapReplyMagic) return "not a terse bootstrap reply (wrong magic)";
  if (!known_status(header.status)) {
    return "a reply with unknown status " + std::to_string(header.status);
  }
  const uint64_t limit = header.status == static_cast<uint32_t>(Result::kSuccess.code())
                             ? static_cast<uint64_t>(nranks) * (4 + kMaxBootstrapPayloadBytes)
                             : kMaxBootstrapErrorBytes;
  if (header.body_bytes > limit) {
    return "a " + std::to_string(header.body_bytes) + "-byte body, more than such a reply holds";
  }
  return "";
}

void hello_mac(const BootstrapKey& key, const uint8_t nonce[kBootstrapNonceBytes],
               const BootstrapHello& hello, const uint8_t* payload,
               uint8_t mac[kBootstrapMacBytes]) {
  std::vector<uint8_t> header = encode_hello(hello);
  const MacPiece pieces[] = {{"hello", 5},
                             {nonce, kBootstrapNonceBytes},
                             {header.data(), kHelloSignedBytes},
                             {payload, hello.payload_bytes}};
  bootstrap_mac(key, pieces, 4, mac);
}

void reply_mac(const BootstrapKey& key, const uint8_t nonce[kBootstrapNonceBytes],
               const BootstrapReplyHeader& header, const uint8_t body_digest[kBootstrapDigestBytes],
               uint8_t mac[kBootstrapMacBytes]) {
  std::vector<uint8_t> head = encode_reply_header(header);
  const MacPiece pieces[] = {{"reply", 5},
                             {nonce, kBootstrapNonceBytes},
                             {head.data(), kReplySignedBytes},
                             {body_digest, kBootstrapDigestBytes}};
  bootstrap_mac(key, pieces, 4, mac);
}

std::vector<uint8_t> encode_payload_table(const std::vector<std::vector<uint8_t>>& payloads) {
  std::vector<uint8_t> body;
  ByteWriter writer(&body);
  for (const std::vector<uint8_t>& payload : payloads) {
    writer.u32(static_cast<uint32_t>(payload.size()));
    writer.bytes(payload.data(), payload.size());
  }
  return body;
}

bool decode_payload_table(const uint8_t* body, size_t size, int nranks,
                          std::vector<std::vector<uint8_t>>* payloads) {
  if (nranks < 1 || nranks > kMaxBootstrapRanks) return false;
  ByteReader reader(body, size);
  payloads->assign(nranks, {});
  for (int rank = 0; rank < nranks; ++rank) {
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    if (!reader.u32(&length) || length > kMaxBootstrapPayloadBytes ||
        !reader.bytes(length, &data)) {
      return false;
    }
    (*payloads)[rank].assign(data, data + length);
  }
  return reader.remaining() == 0;
}

}  // namespace terse
