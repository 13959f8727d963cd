// RDMA NICs seen through ibverbs (rdma-core): every port of every device, its link layer and
// speed, for the topology layer's NIC choice and cost model. A machine without RDMA devices (or
// without the kernel modules) has zero ports; that is a normal answer, not an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace terse {

enum class RdmaLinkLayer { kUnspecified, kInfiniBand, kEthernet };

struct RdmaPort {
  std::string device;  // "mlx5_0"
  int port = 0;        // 1-based, as ibverbs numbers them
  RdmaLinkLayer link_layer = RdmaLinkLayer::kUnspecified;
  bool active = false;   // IBV_PORT_ACTIVE
  int lanes = 0;         // from active_width; 0 when unknown
  double lane_gbps = 0;  // from active_speed (nominal, as NCCL counts it); 0 when unknown
  // The device's sysfs directory resolved to its PCI path, "" when it has none.
  std::string pci_path;

  double gbps() const { return lanes * lane_gbps; }
};

Result discover_rdma_ports(std::vector<RdmaPort>* ports);

const char* rdma_link_layer_name(RdmaLinkLayer link_layer);
// ibv_port_attr::active_width / active_speed decoded; 0 for codes ibverbs does not define.
int ibverbs_width_lanes(uint8_t active_width);
double ibverbs_lane_gbps(uint8_t active_speed);

}  // namespace terse
