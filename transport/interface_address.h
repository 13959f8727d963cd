// Which local address the bootstrap root listens on, chosen as NCCL chooses its socket
// interface: TERSE_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) lists interface-name prefixes, "^"
// in front excludes them instead, "=" in front asks for exact names ("=eth0,eth1"). Unset, the
// first up interface that is neither loopback nor docker*; loopback when there is no other.
// TERSE_SOCKET_FAMILY (or NCCL_SOCKET_FAMILY) = AF_INET | AF_INET6 restricts the family;
// otherwise an interface's IPv4 address is preferred to its IPv6 ones.
#pragma once

#include <string>

#include "common/result.h"
#include "transport/socket_address.h"

namespace terse {

struct InterfaceAddress {
  std::string interface_name;
  SocketAddress address;  // port 0
};

Result find_interface_address(InterfaceAddress* out);

// Whether `name` passes an NCCL-style interface list such as "eth,ib", "^docker,lo" or "=eth0".
bool interface_name_matches(const std::string& name, const std::string& list);

}  // namespace terse
