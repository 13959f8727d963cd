// hwloc's tree turned into MachineTopology (hwloc_discovery.cpp says how).
#pragma once

#include "topology/hwloc_loader.h"
#include "topology/machine_topology.h"

namespace terse {

// GPUs, NICs, NUMA nodes, switches and localities of a loaded hwloc topology. Speeds stay 0 and
// port states come from hwloc's PortNState infos (4 = active), when it has them.
void describe_hwloc_topology(hwloc_topology_t hwloc, MachineTopology* topology);

}  // namespace terse
