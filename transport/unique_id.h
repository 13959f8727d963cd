// The 128-byte unique id that names one communicator's rendezvous (the plugin copies it into
// ncclUniqueId::internal). It carries where the bootstrap root listens and the secret every
// rank proves it holds (bootstrap_key.h) without sending it:
//
//   offset  size  field
//        0     4  magic "trse"
//        4     2  format version (1), little-endian
//        6     1  flags: bit 0 = no root runs yet, rank 0 starts it (NCCL_COMM_ID)
//        7     1  address family: 4 or 6
//        8     2  root port, little-endian
//       10     2  zero
//       12     4  IPv6 scope id (link-local addresses), little-endian
//       16    16  root address (IPv4 uses the first 4 bytes)
//       32     8  secret, little-endian
//       40    88  zero
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.h"
#include "transport/socket_address.h"

namespace terse {

// NCCL_UNIQUE_ID_BYTES: the id fills ncclUniqueId exactly (checked where the NCCL API is,
// plugin/comm_init.cpp).
constexpr size_t kUniqueIdBytes = 128;

struct UniqueId {
  char internal[kUniqueIdBytes];
};

struct UniqueIdFields {
  SocketAddress root;                      // where the bootstrap root listens
  uint64_t secret = 0;                     // the bootstrap key is derived from it (bootstrap_key.h)
  bool root_started_by_rank_zero = false;  // set for NCCL_COMM_ID: rank 0 starts the root
};

void encode_unique_id(const UniqueIdFields& fields, UniqueId* id);
// Refuses ids that are not terse's (wrong magic or version, unknown family, no port) with
// Result::kInvalidArgument, e.g. an id that was not broadcast intact.
Result decode_unique_id(const UniqueId& id, UniqueIdFields* fields);

// What ncclGetUniqueId does. With TERSE_COMM_ID (or NCCL_COMM_ID) = host:port set it starts
// nothing and returns an id naming that address, the same on every rank that calls it, so the
// id need not be broadcast; rank 0 then starts the root there during init. Otherwise it starts a
// bootstrap root in this process, listening on the interface chosen as described in
// interface_address.h, with a fresh random secret (getrandom). The root serves one rendezvous
// and exits; it also gives up TERSE_TIMEOUT_S after it started if not every rank came.
Result create_unique_id(UniqueId* id);

// Starts a bootstrap root in this process and returns its id whatever TERSE_COMM_ID says: for
// ids made at run time (ncclCommSplit's sub-communicators), which must not all name the one
// address the environment gives.
Result create_unique_id_with_own_root(UniqueId* id);

// The id fields TERSE_COMM_ID / NCCL_COMM_ID describe; `*present` false when neither is set.
// The secret is a hash of the variable's text: it keeps out ranks of a job that uses another
// address, but anyone who knows the address knows it too (NCCL_COMM_ID has no secret at all).
Result unique_id_from_environment(UniqueIdFields* fields, bool* present);

// A 16-bit communicator number for the tag layout, derived from the secret so that every rank
// computes the same one without talking.
uint16_t communicator_tag_id(uint64_t secret);

}  // namespace terse
