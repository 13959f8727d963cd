// Message patterns that exercise a Transport and check every byte, shared by the tests that run
// ranks as threads and the helper executable that runs them as processes (no gtest there, so
// problems come back as a result and a sentence).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace test {

// The byte at `index` of the message `from` sends to `to`: any misrouted, misplaced or stale byte
// shows up.
uint8_t pattern_byte(int from, int to, uint32_t operation, size_t index);

// Sizes cover the protocols UCX switches between: empty, one byte, odd (unaligned) sizes, eager,
// and several MiB (rendezvous).
size_t all_to_all_message_bytes(int from, int to, uint32_t sequence);

// Every rank sends `bytes` to rank + 1 and receives from rank - 1, `rounds` times; buffers start
// one byte past an aligned address.
Result ring_exchange(Transport& transport, size_t bytes, int rounds, uint32_t sequence,
                     std::string* problem);

// Every rank sends a message of all_to_all_message_bytes(from, to) to every rank, itself
// included, with all transfers in flight at once.
Result all_to_all_exchange(Transport& transport, uint32_t sequence, std::string* problem);

// Barrier, then an allgather of (rank, host identity hash) checked against host_identity().
Result control_collectives(Transport& transport, std::string* problem);

}  // namespace test
}  // namespace terse
