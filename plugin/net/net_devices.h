// The plugin's devices: one per up IPv4 interface (TERSE_NET_IF, an NCCL-style list such as
// "eth,ib" or "^docker,lo" or "=eth0", restricts them; unset, every interface but loopback and
// docker*, or loopback alone when there is no other). The interface's address is where a listen
// comm waits for its peer's handshake; UCX then picks its own lanes (UCX_TLS, UCX_NET_DEVICES).
// RDMA NICs without an IP interface are not devices yet.
#pragma once

#include <string>
#include <vector>

#include "plugin/net/net_abi.h"
#include "transport/socket_address.h"

namespace terse::net {

struct NetDevice {
  std::string name;       // interface name
  std::string pci_path;   // /sys/devices/... of the interface's device; empty when virtual
  SocketAddress address;  // port 0
  int speed_mbps;         // /sys/class/net/<if>/speed, TERSE_NET_SPEED_MBPS overrides
};

// Finds the devices once per process; later calls return the same list.
ncclResult_t net_devices(const std::vector<NetDevice>** out);

}  // namespace terse::net
