// The three messages of the bootstrap rendezvous. A rank connects to the root, which at once
// sends a challenge (a fresh random nonce); the rank answers with a hello (fixed header, then its
// payload); when every rank has arrived the root answers each with a reply (fixed header, then
// either every rank's payload in rank order or, on failure, a sentence saying why). All
// integers little-endian.
//
//   challenge: magic u32 | version u16 | reserved u16 | nonce 16 bytes
//   hello:     magic u32 | version u16 | reserved u16 | rank u32 | nranks u32 |
//              payload bytes u32 | reserved u32 | mac 32 bytes | payload
//   reply:     magic u32 | status u32 (a Result code) | body bytes u64 | mac 32 bytes |
//              body = (length u32 | payload) x nranks   or   error sentence
//
// The hello's mac is HMAC-SHA256 under the bootstrap key (bootstrap_key.h) over "hello", the
// nonce, the header up to the mac, and the payload; the reply's over "reply", the nonce, the
// header up to the mac, and the SHA-256 digest of the body (computed once for all ranks: the
// rank table is the same for each, only the nonce differs). The root admits only hellos whose mac
// it can reproduce, and a rank believes only a reply whose mac it can: neither side ever sends the
// key, and a captured hello is useless against another connection's nonce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/bootstrap_key.h"

namespace terse {

constexpr uint32_t kBootstrapChallengeMagic = 0x6c616863;  // "chal" in memory order
constexpr uint32_t kBootstrapHelloMagic = 0x6c6c6568;      // "hell"
constexpr uint32_t kBootstrapReplyMagic = 0x796c7072;      // "rply"
constexpr uint16_t kBootstrapVersion = 2;
constexpr size_t kBootstrapChallengeBytes = 24;
constexpr size_t kBootstrapHelloBytes = 24 + kBootstrapMacBytes;
constexpr size_t kBootstrapReplyHeaderBytes = 16 + kBootstrapMacBytes;
// Bounds that keep a malformed or hostile message from making anyone allocate much: a payload
// is a UCX worker address plus a host name (well under 4 KiB in practice), an error sentence
// a line, and a communicator at most 64 Ki ranks (NCCL's own tables are sized far below that).
constexpr uint32_t kMaxBootstrapPayloadBytes = 64 * 1024;
constexpr int kMaxBootstrapRanks = 1 << 16;
constexpr uint64_t kMaxBootstrapErrorBytes = 4096;

struct BootstrapChallenge {
  uint32_t magic = kBootstrapChallengeMagic;
  uint16_t version = kBootstrapVersion;
  uint8_t nonce[kBootstrapNonceBytes] = {};
};

struct BootstrapHello {
  uint32_t magic = kBootstrapHelloMagic;
  uint16_t version = kBootstrapVersion;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t payload_bytes = 0;
  uint8_t mac[kBootstrapMacBytes] = {};
};

struct BootstrapReplyHeader {
  uint32_t magic = kBootstrapReplyMagic;
  // A Result's code once check_reply_header accepted it; kept as sent until then (a value
  // outside the codes must not become a Result).
  uint32_t status = Result::kSuccess.code();
  uint64_t body_bytes = 0;
  uint8_t mac[kBootstrapMacBytes] = {};
};

// Each decode reads exactly its fixed size from `bytes` and checks nothing else: the caller
// decides what is acceptable (check_hello_header, check_reply_header).
std::vector<uint8_t> encode_challenge(const BootstrapChallenge& challenge);
BootstrapChallenge decode_challenge(const uint8_t* bytes);
std::vector<uint8_t> encode_hello(const BootstrapHello& hello);
BootstrapHello decode_hello(const uint8_t* bytes);
std::vector<uint8_t> encode_reply_header(const BootstrapReplyHeader& header);
BootstrapReplyHeader decode_reply_header(const uint8_t* bytes);

// Why a hello header cannot be from a rank of this terse (wrong magic or version, a field out
// of its bound), or "" when it may be; decided before reading, or allocating for, its payload.
std::string check_hello_header(const BootstrapHello& hello);
// Why a reply header is unacceptable to a rank of `nranks` ("" when it is not): wrong magic,
// a status no root sends, or a body longer than such a reply can be.
std::string check_reply_header(const BootstrapReplyHeader& header, int nranks);

// The codes. `payload`/`body` are the bytes that follow the header.
void hello_mac(const BootstrapKey& key, const uint8_t nonce[kBootstrapNonceBytes],
               const BootstrapHello& hello, const uint8_t* payload,
               uint8_t mac[kBootstrapMacBytes]);
void reply_mac(const BootstrapKey& key, const uint8_t nonce[kBootstrapNonceBytes],
               const BootstrapReplyHeader& header, const uint8_t body_digest[kBootstrapDigestBytes],
               uint8_t mac[kBootstrapMacBytes]);

// The success body: every rank's payload in rank order, each with its length.
std::vector<uint8_t> encode_payload_table(const std::vector<std::vector<uint8_t>>& payloads);
// False when `body` is not exactly `nranks` length-prefixed payloads of at most
// kMaxBootstrapPayloadBytes each.
bool decode_payload_table(const uint8_t* body, size_t size, int nranks,
                          std::vector<std::vector<uint8_t>>* payloads);

}  // namespace terse
