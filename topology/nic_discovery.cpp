#include "topology/nic_discovery.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct DeviceContextDeleter {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};

RdmaLinkLayer decode_link_layer(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return RdmaLinkLayer::kInfiniBand;
    case IBV_LINK_LAYER_ETHERNET:
      return RdmaLinkLayer::kEthernet;
    default:
      return RdmaLinkLayer::kUnspecified;
  }
}

std::string pci_path_of(const std::string& device) {
  std::string link = "/sys/class/infiniband/" + device + "/device";
  char resolved[PATH_MAX];
  return realpath(link.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// Appends every port of one device; a device that cannot be opened or queried is skipped (it
// may belong to another container or be going away), not fatal.
void add_device_ports(ibv_device* device, std::vector<RdmaPort>* ports) {
  const char* name = ibv_get_device_name(device);
  std::unique_ptr<ibv_context, DeviceContextDeleter> context(ibv_open_device(device));
  if (context == nullptr) {
    TERSE_INFO("RDMA device %s cannot be opened (%s); skipping it", name, strerror(errno));
    return;
  }
  ibv_device_attr device_attributes{};
  if (ibv_query_device(context.get(), &device_attributes) != 0) {
    TERSE_INFO("RDMA device %s cannot be queried; skipping it", name);
    return;
  }
  std::string pci_path = pci_path_of(name);
  for (int port = 1; port <= device_attributes.phys_port_cnt; ++port) {
    ibv_port_attr attributes{};
    if (ibv_query_port(context.get(), static_cast<uint8_t>(port), &attributes) != 0) {
      TERSE_INFO("RDMA device %s port %d cannot be queried; skipping it", name, port);
      continue;
    }
    RdmaPort entry;
    entry.device = name;
    entry.port = port;
    entry.link_layer = decode_link_layer(attributes.link_layer);
    entry.active = attributes.state == IBV_PORT_ACTIVE;
    entry.lanes = ibverbs_width_lanes(attributes.active_width);
    entry.lane_gbps = ibverbs_lane_gbps(attributes.active_speed);
    entry.pci_path = pci_path;
    TERSE_INFO("RDMA %s port %d: %s, %s, %d x %g Gbit/s", name, port,
               rdma_link_layer_name(entry.link_layer), entry.active ? "active" : "not active",
               entry.lanes, entry.lane_gbps);
    ports->push_back(entry);
  }
}

}  // namespace

Result discover_rdma_ports(std::vector<RdmaPort>* ports) {
  if (ports == nullptr) return fail(Result::kInvalidArgument, "RDMA port list pointer is NULL");
  ports->clear();
  int count = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> devices(ibv_get_device_list(&count));
  if (devices == nullptr) {
    // No verbs support in this kernel or container: the same as having no RDMA NIC.
    TERSE_INFO("no RDMA devices (ibv_get_device_list: %s)", strerror(errno));
    return Result::kSuccess;
  }
  for (int i = 0; i < count; ++i) add_device_ports(devices.get()[i], ports);
  TERSE_INFO("%d RDMA device(s), %zu port(s)", count, ports->size());
  return Result::kSuccess;
}

const char* rdma_link_layer_name(RdmaLinkLayer link_layer) {
  switch (link_layer) {
    case RdmaLinkLayer::kInfiniBand:
      return "InfiniBand";
    case RdmaLinkLayer::kEthernet:
      return "Ethernet (RoCE)";
    default:
      return "unspecified";
  }
}

int ibverbs_width_lanes(uint8_t active_width) {
  switch (active_width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

double ibverbs_lane_gbps(uint8_t active_speed) {
  switch (active_speed) {
    case 1:
      return 2.5;  // SDR
    case 2:
      return 5;  // DDR
    case 4:
      return 10;  // QDR
    case 8:
      return 10;  // FDR10
    case 16:
      return 14;  // FDR
    case 32:
      return 25;  // EDR
    case 64:
      return 50;  // HDR
    case 128:
      return 100;  // NDR
    default:
      return 0;
  }
}

}  // namespace terse
