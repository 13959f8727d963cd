// Whether encoding a message pays, as a send comm decides it (send_comm.cpp): an encode pays when
// it saves enough, and after a run of encodes that did not, only a few eligible messages try.
#pragma once

#include <cstddef>
#include <cstdint>

namespace terse::net {

// Whether encoding a `size`-byte message into `encoded` bytes (0: no encoding came out) paid.
bool encode_paid(size_t encoded, size_t size);
// Whether `futile_encodes` encodes in a row that did not pay are enough to stop trying every
// eligible message.
bool encodes_futile(int futile_encodes);
// Whether the `eligible_while_futile`-th eligible message met while encodes are futile is tried
// nonetheless.
bool retry_encode(uint64_t eligible_while_futile);

}  // namespace terse::net
