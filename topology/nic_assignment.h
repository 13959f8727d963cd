// Which NIC each local rank of a node sends through. With GPUs, local rank i drives GPU
// i mod #GPUs and takes the NIC closest to that GPU (the lowest path class), spreading ranks
// over equally close NICs (the least used so far, then the lowest index). Without GPUs, a rank
// takes the least used NIC of its NUMA node when that is known and has one, else of all NICs:
// round-robin. Only usable RDMA ports are candidates when the node has any (UCX sends over
// them), else usable Ethernet NICs; NICs whose port is down only when every NIC is down.
//
// The NIC index of local rank i is its rail: an inter-node ring that joins local rank i of every
// node keeps each hop on one rail (the same switch on each node, on a rail-optimised fabric).
#pragma once

#include <vector>

#include "topology/machine_topology.h"

namespace terse {

struct RankNic {
  int gpu = -1;                      // the GPU it drives; -1 without GPUs
  int nic = -1;                      // index into MachineTopology::nics; -1 without NICs
  PathClass path = PathClass::kSys;  // GPU to NIC; SYS without a GPU or NIC
};

struct NicPlan {
  std::vector<RankNic> ranks;  // by local rank

  // ranks[i].nic for every local rank i.
  std::vector<int> rails() const;
};

// `numa_of_rank` (optional, by local rank) is the NUMA node (OS index) each rank runs on, -1
// when unknown; it matters only on a node without GPUs.
NicPlan assign_nics(const MachineTopology& topology, int local_ranks,
                    const std::vector<int>& numa_of_rank = {});

}  // namespace terse
