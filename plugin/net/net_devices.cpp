#include "plugin/net/net_devices.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "common/env.h"
#include "plugin/net/net_log.h"
#include "transport/interface_address.h"

namespace terse::net {
namespace {

// When the kernel does not know (virtual interfaces report -1 or nothing), NCCL's own socket
// transport assumes 10 Gbit/s; so do we.
constexpr int kUnknownSpeedMbps = 10000;

int interface_speed(const std::string& name) {
  std::ifstream file("/sys/class/net/" + name + "/speed");
  int speed = -1;
  if (!(file >> speed) || speed <= 0) return kUnknownSpeedMbps;
  return speed;
}

std::string interface_pci_path(const std::string& name) {
  char resolved[PATH_MAX];
  std::string link = "/sys/class/net/" + name + "/device";
  if (realpath(link.c_str(), resolved) == nullptr) return std::string();
  return resolved;
}

ncclResult_t discover(std::vector<NetDevice>* devices) {
  std::string list = env_string("TERSE_NET_IF", "");
  int64_t speed_override = 0;
  if (env_int("TERSE_NET_SPEED_MBPS", 0, &speed_override) != ncclSuccess || speed_override < 0 ||
      speed_override > INT_MAX) {
    return NET_FAIL(ncclInvalidArgument,
                    "TERSE_NET_SPEED_MBPS=%s is not a link speed in Mbit/s (a whole number >= 1)",
                    env_string("TERSE_NET_SPEED_MBPS", "").c_str());
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    return NET_FAIL(ncclSystemError, "getifaddrs failed: cannot list network interfaces");
  }
  std::vector<NetDevice> loopback;
  for (ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0) continue;
    std::string name = entry->ifa_name;
    NetDevice device{name, interface_pci_path(name),
                     SocketAddress::from_sockaddr(entry->ifa_addr, sizeof(sockaddr_in)),
                     speed_override > 0 ? static_cast<int>(speed_override) : interface_speed(name)};
    bool is_loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0;
    if (!list.empty()) {
      if (interface_name_matches(name, list)) devices->push_back(device);
    } else if (is_loopback) {
      loopback.push_back(device);
    } else if (name.rfind("docker", 0) != 0) {
      devices->push_back(device);
    }
  }
  freeifaddrs(interfaces);
  if (devices->empty() && list.empty()) *devices = loopback;
  if (devices->empty()) {
    return NET_FAIL(ncclSystemError, "no usable network interface%s%s",
                    list.empty() ? "" : " matches TERSE_NET_IF=", list.c_str());
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t net_devices(const std::vector<NetDevice>** out) {
  static std::mutex mutex;
  static std::vector<NetDevice> devices;
  static ncclResult_t result = ncclInternalError;
  static bool done = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done) {
    result = discover(&devices);
    done = result == ncclSuccess;  // a bad setting is reported again on the next call
    if (!done) devices.clear();
  }
  *out = &devices;
  return result;
}

}  // namespace terse::net
