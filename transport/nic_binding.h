// Which NIC this rank's network traffic leaves through (docs/design.md section 7): on a node with
// several usable NICs, each local rank gets the one topology assigns it (topology/
// nic_assignment.h: the closest to its GPU, spread over equally close ones; its rail), and the
// network UCX context is restricted to it (UCX's NET_DEVICES), so that ranks do not all crowd
// onto the first NIC and an inter-node ring that joins local rank i of every node stays on one
// rail. A process learns its local rank before any rank is reached, from its launcher:
// LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun), OMPI_COMM_WORLD_LOCAL_RANK/_SIZE (Open MPI),
// MPI_LOCALRANKID/MPI_LOCALNRANKS (MPICH), SLURM_LOCALID/SLURM_NTASKS_PER_NODE (Slurm).
// Nothing is restricted when UCX_NET_DEVICES is set (the user decided), when the node has fewer
// than two usable NICs, when the topology comes from a file (TERSE_TOPO_FILE may describe another
// machine), or when no launcher says the local rank (UCX then picks, as before).
#pragma once

#include <string>

#include "topology/machine_topology.h"

namespace terse {

// This process's local rank and the ranks on its node, from the launcher's environment; false
// when none says (or says something inconsistent).
bool local_rank_from_launcher(int* local_rank, int* local_ranks);

// The UCX NET_DEVICES value for local rank `local_rank` of `local_ranks` on `topology` ("mlx5_3:1",
// "eth1"), or "" when there is nothing to choose (fewer than two usable NICs). `why` gets one line
// for the log ("local rank 3 of 8: NIC3 mlx5_3:1, PIX to GPU3, rail 3").
std::string net_devices_for_local_rank(const MachineTopology& topology, int local_rank,
                                       int local_ranks, std::string* why);

// What this process's network UCX context should be restricted to: "" for no restriction (see
// the file comment), with the reason in `why`.
std::string net_devices_for_this_process(std::string* why);

}  // namespace terse
