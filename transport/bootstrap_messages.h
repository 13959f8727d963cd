// The two messages of the bootstrap rendezvous. A rank connects to the root and sends a hello
// (fixed 32-byte header, then its payload); when every rank has arrived the root answers each
// with a reply (16-byte header, then either every rank's payload in rank order or, on failure,
// a sentence saying why). All integers little-endian.
//
//   hello: magic u32 | version u16 | reserved u16 | secret u64 | rank u32 | nranks u32 |
//          payload bytes u32 | reserved u32 | payload
//   reply: magic u32 | ncclResult_t u32 | body bytes u64 |
//          body = (length u32 | payload) x nranks   or   error sentence
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace terse {

constexpr uint32_t kBootstrapHelloMagic = 0x6c6c6568;  // "hell" in memory order
constexpr uint32_t kBootstrapReplyMagic = 0x796c7072;  // "rply"
constexpr uint16_t kBootstrapVersion = 1;
constexpr size_t kBootstrapHelloBytes = 32;
constexpr size_t kBootstrapReplyHeaderBytes = 16;
// Bounds that keep a malformed or hostile message from making anyone allocate much: a payload
// is a UCX worker address plus a host name (well under 4 KiB in practice).
constexpr uint32_t kMaxBootstrapPayloadBytes = 64 * 1024;
constexpr int kMaxBootstrapRanks = 1 << 20;

struct BootstrapHello {
  uint32_t magic = kBootstrapHelloMagic;
  uint16_t version = kBootstrapVersion;
  uint64_t secret = 0;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t payload_bytes = 0;
};

struct BootstrapReplyHeader {
  uint32_t magic = kBootstrapReplyMagic;
  ncclResult_t status = ncclSuccess;
  uint64_t body_bytes = 0;
};

std::vector<uint8_t> encode_hello(const BootstrapHello& hello);
// Decodes the fixed header (kBootstrapHelloBytes). Checks nothing but the length: the root
// decides what is acceptable.
BootstrapHello decode_hello(const uint8_t* bytes);

std::vector<uint8_t> encode_reply_header(const BootstrapReplyHeader& header);
BootstrapReplyHeader decode_reply_header(const uint8_t* bytes);

// The success body: every rank's payload in rank order, each with its length.
std::vector<uint8_t> encode_payload_table(const std::vector<std::vector<uint8_t>>& payloads);
// False when `body` is not exactly `nranks` length-prefixed payloads.
bool decode_payload_table(const std::vector<uint8_t>& body, int nranks,
                          std::vector<std::vector<uint8_t>>* payloads);

}  // namespace terse
