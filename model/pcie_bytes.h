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
#include <vector>

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

// For "hierarchical" or "rail" around `inner` (one of the above) on the ranks whose hosts
// `hosts` names (hosts[r]: rank r's node; nodes in the order of their first rank, a node's ranks
// in rank order), a tensor of `count` elements of `element_bytes` each. Besides the inner
// algorithm's messages over fp32 node sums (between the node leaders, leader order = node
// order, on the whole tensor; or along rail i, local rank i of every node, on chunk i of the L
// near-equal chunks), the tensor bytes that the uncompressed intra-node phases exchange through
// host memory cross PCIe:
//   hierarchical member: its tensor to the host, the leader's result back to the device;
//   hierarchical leader: each member's tensor to the device (to add it), its result to the host
//                        once when it has members;
//   rail rank:           to the host the chunks it sends to its node's other ranks and its own
//                        finished chunk (the whole tensor); to the device the other ranks' parts
//                        of its own chunk (L - 1 chunks) and the result's other chunks.
// With one node, or one rank per node (hierarchical), or nodes of unequal size (rail), the inner
// algorithm runs flat on every rank.
PcieBytes grouped_device_pcie_bytes(const std::string& algorithm, const std::string& inner,
                                    const Codec& codec, size_t count, size_t element_bytes,
                                    const std::vector<std::string>& hosts, int rank);

}  // namespace model
}  // namespace terse
