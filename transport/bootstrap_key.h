// The key that authenticates the bootstrap handshake (bootstrap_messages.h), and the message
// authentication codes computed with it.
//
// The key is HMAC-SHA256 over the unique id's secret, keyed by TERSE_COMM_SECRET when it is set
// (the text itself, or "@path" for the contents of a file, one trailing newline dropped). Every
// rank and the root derive it on their own and never send it: the wire carries only codes over
// a fresh random challenge, so a listener learns nothing it can replay, and a process that does
// not hold the key can neither join a rendezvous nor answer a rank in the root's place.
//
// What the key is worth depends on where the id's secret came from (see docs/design.md
// section 6, "Security"): ncclGetUniqueId draws it at random and it travels with the id, so it is
// as secret as the channel that broadcasts the id; with TERSE_COMM_ID / NCCL_COMM_ID it is a hash
// of the address, known to anyone who knows the address, and only TERSE_COMM_SECRET keeps strangers
// out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.h"

namespace terse {

constexpr size_t kBootstrapKeyBytes = 32;
constexpr size_t kBootstrapMacBytes = 32;
constexpr size_t kBootstrapNonceBytes = 16;
constexpr size_t kBootstrapDigestBytes = 32;
// A secret longer than this is refused rather than read whole (it is a key, not a file).
constexpr size_t kMaxCommSecretBytes = 4096;

struct BootstrapKey {
  uint8_t bytes[kBootstrapKeyBytes] = {};
};

// Derives the key from the id's secret and TERSE_COMM_SECRET. Fails with Result::kInvalidArgument
// naming TERSE_COMM_SECRET when it names a file that cannot be read, is empty, or is too long.
Result derive_bootstrap_key(uint64_t id_secret, BootstrapKey* key);

// The same from an explicit secret (`secret` may be empty: no TERSE_COMM_SECRET).
void derive_bootstrap_key_from(uint64_t id_secret, const uint8_t* secret, size_t secret_bytes,
                               BootstrapKey* key);

// HMAC-SHA256 under `key` over the concatenation of the given pieces.
struct MacPiece {
  const void* data;
  size_t size;
};
void bootstrap_mac(const BootstrapKey& key, const MacPiece* pieces, size_t count,
                   uint8_t mac[kBootstrapMacBytes]);

// SHA-256 of `size` bytes.
void bootstrap_digest(const void* data, size_t size, uint8_t digest[kBootstrapDigestBytes]);

// Constant-time comparison of two codes.
bool bootstrap_mac_equal(const uint8_t* a, const uint8_t* b);

// Fills `nonce` from the kernel's random source; Result::kSystemError if it cannot.
Result random_bytes(void* out, size_t size);

}  // namespace terse
