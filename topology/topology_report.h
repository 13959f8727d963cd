// terse_topo's text: the path-class matrix between GPUs and NICs laid out as `nvidia-smi topo -m`
// lays it out (each row also naming the device's PCI bus id), its legend, the NIC of each local
// rank, NUMA affinity and the link model. Strings, so that tests read what users read.
#pragma once

#include <string>

#include "topology/link_model.h"
#include "topology/machine_topology.h"
#include "topology/nic_assignment.h"

namespace terse {

// Header "GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA Affinity", one row per device with X on the
// diagonal; "" when the machine has neither GPUs nor NICs.
std::string format_path_matrix(const MachineTopology& topology);
std::string format_path_legend();
// Every section: devices, matrix, legend, NIC per local rank, NUMA nodes, link model.
std::string format_topology_report(const MachineTopology& topology, const NicPlan& plan,
                                   const LinkModel& model);

}  // namespace terse
