// What hwloc does not know about this machine's NICs: RDMA port state and speed (ibverbs) and
// Ethernet speed and state (sysfs). Only for the live machine: a file describes another one.
#include <algorithm>

#include "common/log.h"
#include "topology/interface_speed.h"
#include "topology/live_details.h"

namespace terse {
namespace {

NicDevice nic_of_port(const RdmaPort& port, const DeviceLocation& where) {
  NicDevice nic;
  nic.name = port.device;
  nic.kind = NicKind::kRdma;
  nic.port = port.port;
  nic.state = port.active ? PortState::kActive : PortState::kDown;
  nic.link_layer = port.link_layer;
  nic.gbps = port.gbps();
  nic.speed_source = nic.gbps > 0 ? "ibverbs" : "";
  nic.where = where;
  return nic;
}

}  // namespace

void apply_rdma_ports(const std::vector<RdmaPort>& ports, MachineTopology* topology) {
  std::vector<NicDevice> nics;
  std::vector<bool> used(ports.size(), false);
  for (size_t i = 0; i < topology->nics.size(); ++i) {
    const NicDevice& nic = topology->nics[i];
    if (nic.kind != NicKind::kRdma) {
      nics.push_back(nic);
      continue;
    }
    // hwloc lists a device once per port it knew of; ibverbs' ports replace them all.
    const bool first_of_device =
        std::none_of(topology->nics.begin(), topology->nics.begin() + static_cast<long>(i),
                     [&](const NicDevice& before) { return before.name == nic.name; });
    bool replaced = false;
    for (size_t p = 0; p < ports.size(); ++p) {
      if (ports[p].device != nic.name) continue;
      replaced = true;
      if (first_of_device && !used[p]) nics.push_back(nic_of_port(ports[p], nic.where));
      used[p] = true;
    }
    if (!replaced) nics.push_back(nic);  // ibverbs cannot open it: keep what hwloc said
  }
  for (size_t p = 0; p < ports.size(); ++p) {
    if (used[p]) continue;
    TERSE_INFO("topology: RDMA device %s is not in hwloc's topology; its location is unknown",
               ports[p].device.c_str());
    nics.push_back(nic_of_port(ports[p], DeviceLocation{}));
  }
  topology->nics = std::move(nics);
}

void apply_interface_details(const std::string& net_dir, MachineTopology* topology) {
  for (NicDevice& nic : topology->nics) {
    if (nic.kind != NicKind::kEthernet) continue;
    nic.gbps = interface_gbps(net_dir, nic.name);
    nic.speed_source = nic.gbps > 0 ? "sysfs" : "";
    nic.state = interface_state(net_dir, nic.name);
  }
  for (const std::string& name : virtual_interfaces(net_dir)) {
    topology->other_interfaces.push_back(NetInterface{name, interface_gbps(net_dir, name)});
  }
}

}  // namespace terse
