#include "topology/machine_topology.h"

#include <algorithm>

namespace terse {

const char* nic_kind_name(NicKind kind) {
  return kind == NicKind::kRdma ? "RDMA" : "Ethernet";
}

const char* port_state_name(PortState state) {
  switch (state) {
    case PortState::kActive:
      return "active";
    case PortState::kDown:
      return "down";
    default:
      return "state unknown";
  }
}

std::string NicDevice::label() const {
  return kind == NicKind::kRdma ? name + ":" + std::to_string(port) : name;
}

PathClass MachineTopology::gpu_gpu(int a, int b) const {
  if (a == b) return PathClass::kLoc;
  const std::pair<int, int> pair(std::min(a, b), std::max(a, b));
  if (std::find(nvlinks.begin(), nvlinks.end(), pair) != nvlinks.end()) return PathClass::kNvl;
  return classify_path(gpus.at(static_cast<size_t>(a)).where,
                       gpus.at(static_cast<size_t>(b)).where);
}

PathClass MachineTopology::gpu_nic(int gpu, int nic) const {
  return classify_path(gpus.at(static_cast<size_t>(gpu)).where,
                       nics.at(static_cast<size_t>(nic)).where);
}

PathClass MachineTopology::nic_nic(int a, int b) const {
  if (a == b) return PathClass::kLoc;
  return classify_path(nics.at(static_cast<size_t>(a)).where,
                       nics.at(static_cast<size_t>(b)).where);
}

const Locality* MachineTopology::locality_of(const DeviceLocation& where) const {
  if (where.locality < 0 || static_cast<size_t>(where.locality) >= localities.size())
    return nullptr;
  return &localities[static_cast<size_t>(where.locality)];
}

}  // namespace terse
