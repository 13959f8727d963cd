// TERSE_NET_EAGER_BYTES (default 16384, 0 disables): messages of at most this many bytes go to
// UCX at once, without waiting for the receiver's clear-to-send. A small message is all latency,
// and the clear-to-send round trip doubled it (14 us against UCX's 6 us over TCP loopback);
// UCX keeps an eager message that arrives before its receive as unexpected and copies it once,
// which for a few KiB costs less than the round trip. Larger messages keep the clear-to-send:
// they land in a posted receive, and a send larger than its receive is refused at the sender.
// Only the sender reads it (at connect): every irecv still announces all its entries, so the two
// ends need not agree on the value.
#pragma once

#include <cstddef>

#include "plugin/net/net_abi.h"

namespace terse::net {

constexpr size_t kDefaultEagerBytes = 16384;
// A bound on the setting: far above any transport's eager size an "eager" send is UCX's own
// rendezvous anyway, and it would only give up the sender's size check.
constexpr size_t kMaxEagerBytes = size_t{1} << 20;

// TERSE_NET_EAGER_BYTES, read per call (each connect); the error names the value.
ncclResult_t eager_bytes(size_t* out);

}  // namespace terse::net
