// Fuzz target: what arrives on the bootstrap root's port or in its reply, from anyone who can
// connect (bootstrap_messages.h), and the unique id and rank table entries built on them. The
// first input byte chooses the parser; the rest are the bytes it gets:
//   0 hello header (+ payload), 1 reply header (+ body), 2 challenge, 3 unique id, 4 peer info.
//
// Each parser must accept or refuse without reading out of bounds, and what it accepts must
// hold the bounds the root relies on (rank < nranks <= 65536, payload <= 64 KiB, an error body
// <= 4 KiB) and re-encode to the same bytes (nothing is read that is not understood).
#include <cstring>
#include <vector>

#include "common/result.h"
#include "fuzz_support.h"
#include "transport/bootstrap_key.h"
#include "transport/bootstrap_messages.h"
#include "transport/peer_info.h"
#include "transport/unique_id.h"

namespace terse::fuzz {
namespace {

void fuzz_hello(const uint8_t* data, size_t size) {
  if (size < kBootstrapHelloBytes) return;
  const BootstrapHello hello = decode_hello(data);
  if (!check_hello_header(hello).empty()) return;
  TERSE_FUZZ_REQUIRE(hello.nranks >= 1 && hello.nranks <= static_cast<uint32_t>(kMaxBootstrapRanks),
                     "accepted nranks %u", hello.nranks);
  TERSE_FUZZ_REQUIRE(hello.rank < hello.nranks, "accepted rank %u of %u", hello.rank, hello.nranks);
  TERSE_FUZZ_REQUIRE(hello.payload_bytes <= kMaxBootstrapPayloadBytes, "accepted a %u-byte payload",
                     hello.payload_bytes);
  // Re-encoding gives the header back, reserved fields zeroed.
  std::vector<uint8_t> expected(data, data + kBootstrapHelloBytes);
  memset(&expected[6], 0, 2);
  memset(&expected[20], 0, 4);
  TERSE_FUZZ_REQUIRE(encode_hello(hello) == expected, "hello does not re-encode");
  // The root checks the code only over a payload that has fully arrived.
  if (size - kBootstrapHelloBytes < hello.payload_bytes) return;
  BootstrapKey key;
  derive_bootstrap_key_from(0x1234, nullptr, 0, &key);
  const uint8_t nonce[kBootstrapNonceBytes] = {7};
  uint8_t mac[kBootstrapMacBytes];
  hello_mac(key, nonce, hello, data + kBootstrapHelloBytes, mac);
  (void)bootstrap_mac_equal(mac, hello.mac);
}

void fuzz_reply(const uint8_t* data, size_t size) {
  if (size < 1 + kBootstrapReplyHeaderBytes) return;
  const int nranks = 1 + data[0] % 64;
  data += 1;
  size -= 1;
  const BootstrapReplyHeader header = decode_reply_header(data);
  if (!check_reply_header(header, nranks).empty()) return;
  const size_t available = size - kBootstrapReplyHeaderBytes;
  if (header.status != static_cast<uint32_t>(Result::kSuccess.code())) {
    TERSE_FUZZ_REQUIRE(header.body_bytes <= kMaxBootstrapErrorBytes,
                       "accepted a %llu-byte error sentence",
                       static_cast<unsigned long long>(header.body_bytes));
    return;
  }
  if (header.body_bytes > available) return;  // a rank would wait for the rest
  std::vector<std::vector<uint8_t>> payloads;
  const uint8_t* body = data + kBootstrapReplyHeaderBytes;
  if (!decode_payload_table(body, header.body_bytes, nranks, &payloads)) return;
  TERSE_FUZZ_REQUIRE(payloads.size() == static_cast<size_t>(nranks), "%zu payloads for %d ranks",
                     payloads.size(), nranks);
  const std::vector<uint8_t> again = encode_payload_table(payloads);
  TERSE_FUZZ_REQUIRE(
      again.size() == header.body_bytes && memcmp(again.data(), body, again.size()) == 0,
      "rank table does not re-encode");
}

void fuzz_challenge(const uint8_t* data, size_t size) {
  if (size < kBootstrapChallengeBytes) return;
  std::vector<uint8_t> expected(data, data + kBootstrapChallengeBytes);
  memset(&expected[6], 0, 2);
  TERSE_FUZZ_REQUIRE(encode_challenge(decode_challenge(data)) == expected,
                     "challenge does not re-encode");
}

void fuzz_unique_id(const uint8_t* data, size_t size) {
  if (size < kUniqueIdBytes) return;
  UniqueId id;
  memcpy(id.internal, data, kUniqueIdBytes);
  UniqueIdFields fields;
  const Result result = decode_unique_id(id, &fields);
  if (result != Result::kSuccess) {
    TERSE_FUZZ_REQUIRE(result == Result::kInvalidArgument && last_error()[0] != '\0',
                       "unique id refused with %d and no reason", result.code());
    return;
  }
  // What an accepted id says survives encoding it again.
  UniqueId again;
  encode_unique_id(fields, &again);
  UniqueIdFields reread;
  TERSE_FUZZ_REQUIRE(decode_unique_id(again, &reread) == Result::kSuccess, "re-encoded id refused");
  TERSE_FUZZ_REQUIRE(reread.secret == fields.secret && reread.root.port() == fields.root.port() &&
                         reread.root_started_by_rank_zero == fields.root_started_by_rank_zero,
                     "unique id does not survive a round trip");
}

void fuzz_peer_info(const uint8_t* data, size_t size) {
  PeerInfo info;
  const Result result = decode_peer_info(std::vector<uint8_t>(data, data + size), 3, &info);
  if (result != Result::kSuccess) {
    TERSE_FUZZ_REQUIRE(result == Result::kRemoteError && last_error()[0] != '\0',
                       "peer info refused with %d and no reason", result.code());
    return;
  }
  TERSE_FUZZ_REQUIRE(encode_peer_info(info) == std::vector<uint8_t>(data, data + size),
                     "peer info does not re-encode");
}

}  // namespace
}  // namespace terse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  terse::fuzz::quiet_logs();
  if (size < 1) return 0;
  switch (data[0] % 5) {
    case 0:
      terse::fuzz::fuzz_hello(data + 1, size - 1);
      break;
    case 1:
      terse::fuzz::fuzz_reply(data + 1, size - 1);
      break;
    case 2:
      terse::fuzz::fuzz_challenge(data + 1, size - 1);
      break;
    case 3:
      terse::fuzz::fuzz_unique_id(data + 1, size - 1);
      break;
    default:
      terse::fuzz::fuzz_peer_info(data + 1, size - 1);
      break;
  }
  return 0;
}
