// What one rank copies between device and host memory in one compressed allreduce on the CUDA
// execution backend (collectives/compressed/cuda_backend.h), counted from each algorithm's
// documented steps alone, never from the code under test: to the host every message the rank
// encodes, to the device every message it decodes (one it received, or its own), each
// Codec::wire_bytes of its elements (fp32 input). The tensor itself never crosses.
//
// Layouts assumed: one piece per chunk or block (the call's piece size at least the largest),
// every chunk or block non-empty (count >= ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "codecs/codec.h"

namespace terse {
namespace model {

struct PcieBytes {
  uint64_t to_host = 0;
  uint64_t to_device = 0;
};

// For algorithm "sra", "ring", "recursive_doubling" or "tree" on `nranks` ranks, rank `rank`'s
// copies for `count` elements. An algorithm not listed gives {0, 0}.
PcieBytes device_pcie_bytes(const std::string& algorithm, const Codec& codec, size_t count,
                            int nranks, int rank);

}  // namespace model
}  // namespace terse
