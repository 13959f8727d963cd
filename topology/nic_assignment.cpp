#include "topology/nic_assignment.h"

namespace terse {
namespace {

// The least used of `candidates` (the lowest index among equals), or -1 when there is none.
int least_used(const std::vector<int>& candidates, const std::vector<int>& uses) {
  int best = -1;
  for (int nic : candidates) {
    if (best < 0 || uses[static_cast<size_t>(nic)] < uses[static_cast<size_t>(best)]) best = nic;
  }
  return best;
}

// The NICs ranks may take: the usable RDMA ports when there are any (UCX sends over them, as
// NCCL takes its IB devices over sockets), else the usable Ethernet NICs, else every NIC.
std::vector<int> nics_to_use(const MachineTopology& topology) {
  std::vector<int> rdma, ethernet, all;
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    const NicDevice& nic = topology.nics[i];
    all.push_back(static_cast<int>(i));
    if (!nic.usable()) continue;
    (nic.kind == NicKind::kRdma ? rdma : ethernet).push_back(static_cast<int>(i));
  }
  if (!rdma.empty()) return rdma;
  return ethernet.empty() ? all : ethernet;
}

}  // namespace

std::vector<int> NicPlan::rails() const {
  std::vector<int> rail;
  for (const RankNic& rank : ranks) rail.push_back(rank.nic);
  return rail;
}

NicPlan assign_nics(const MachineTopology& topology, int local_ranks,
                    const std::vector<int>& numa_of_rank) {
  NicPlan plan;
  const std::vector<int> nics = nics_to_use(topology);
  std::vector<int> uses(topology.nics.size(), 0);
  const int gpus = static_cast<int>(topology.gpus.size());
  for (int rank = 0; rank < local_ranks; ++rank) {
    RankNic choice;
    std::vector<int> candidates;
    if (gpus > 0) {
      choice.gpu = rank % gpus;
      for (int nic : nics) {
        const PathClass path = topology.gpu_nic(choice.gpu, nic);
        if (candidates.empty() || path < choice.path) {
          candidates.clear();
          choice.path = path;
        }
        if (path == choice.path) candidates.push_back(nic);
      }
    } else {
      const int numa = static_cast<size_t>(rank) < numa_of_rank.size()
                           ? numa_of_rank[static_cast<size_t>(rank)]
                           : -1;
      for (int nic : nics) {
        const Locality* place = topology.locality_of(topology.nics[static_cast<size_t>(nic)].where);
        if (numa >= 0 && place != nullptr && place->numa_node == numa) candidates.push_back(nic);
      }
      if (candidates.empty()) candidates = nics;
    }
    choice.nic = least_used(candidates, uses);
    if (choice.nic >= 0) ++uses[static_cast<size_t>(choice.nic)];
    if (choice.nic < 0) choice.path = PathClass::kSys;
    plan.ranks.push_back(choice);
  }
  return plan;
}

}  // namespace terse
