// A variable-length allgather over a fixed-size one: every rank contributes a byte string of any
// length, and every rank receives all of them in rank order. The lengths go first, then each
// string padded to the longest, so it costs two fixed-size allgathers. The settings the ranks
// agree on, the parameter server's worker addresses and wrap mode's address exchange all use it,
// each over its own control path (the communicator's transport, or the real NCCL communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/result.h"

namespace terse {

// Every rank contributes `bytes` bytes at `mine`; `all` receives nranks * bytes in rank order.
using FixedAllgather = std::function<Result(const void* mine, size_t bytes, void* all)>;

// Every rank of `nranks` passes its `mine`; `table` receives each rank's string in rank order.
// A rank whose string is longer than `max_bytes` fails the call on every rank alike
// (Result::kInvalidUsage, naming the rank and `what`), before any string is sent: ranks that
// disagree on such a size are not running the same terse.
Result allgather_bytes(const FixedAllgather& allgather, int nranks,
                       const std::vector<uint8_t>& mine, uint64_t max_bytes, const char* what,
                       std::vector<std::vector<uint8_t>>* table);

}  // namespace terse
