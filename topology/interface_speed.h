// What Linux says about a network interface under /sys/class/net (or a directory laid out like
// it, for tests): its speed, whether it is up, whether a device is behind it.
#pragma once

#include <string>
#include <vector>

#include "topology/machine_topology.h"

namespace terse {

inline constexpr const char kSysClassNet[] = "/sys/class/net";

// <net_dir>/<name>/speed, which holds Mbit/s, in Gbit/s; 0 when unknown (no file, -1, garbage,
// or a name that is not a plain interface name).
double interface_gbps(const std::string& net_dir, const std::string& name);
// <net_dir>/<name>/operstate: "up" is active, "down"/"lowerlayerdown" down, anything else unknown.
PortState interface_state(const std::string& net_dir, const std::string& name);
// Interfaces with no device link (veth, bridges, bonds, tunnels), loopback excluded, sorted.
std::vector<std::string> virtual_interfaces(const std::string& net_dir);

}  // namespace terse
