// What load_machine_topology() adds, for this machine only, to what hwloc holds
// (hwloc_discovery.h): RDMA port state and speed from ibverbs, Ethernet speed and state from
// sysfs. Apart from the loading so that each step is tested alone.
#pragma once

#include <string>
#include <vector>

#include "topology/machine_topology.h"
#include "topology/nic_discovery.h"

namespace terse {

// Replaces each RDMA device's NIC entries by its ibverbs ports (state, link layer, speed), at
// the device's location. A port whose device hwloc did not show is added with an unknown
// location (SYS to everything).
void apply_rdma_ports(const std::vector<RdmaPort>& ports, MachineTopology* topology);

// Ethernet NICs get speed and state from `net_dir` (/sys/class/net); interfaces there with no
// device behind them (virtual ones), other than loopback, become other_interfaces.
void apply_interface_details(const std::string& net_dir, MachineTopology* topology);

}  // namespace terse
