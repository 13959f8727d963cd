#include "transport/interface_address.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

struct Candidate {
  std::string name;
  SocketAddress address;
  bool loopback;
  int preference;  // lower is better within one interface
};

bool is_link_local_ipv6(const SocketAddress& address) {
  if (address.family() != AF_INET6) return false;
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.get());
  return IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr);
}

Result read_family(int* family) {
  std::string text = env_string("TERSE_SOCKET_FAMILY", env_string("NCCL_SOCKET_FAMILY", ""));
  if (text.empty()) {
    *family = AF_UNSPEC;
  } else if (text == "AF_INET") {
    *family = AF_INET;
  } else if (text == "AF_INET6") {
    *family = AF_INET6;
  } else {
    return fail(Result::kInvalidArgument,
                "TERSE_SOCKET_FAMILY (or NCCL_SOCKET_FAMILY)=%s is not AF_INET or AF_INET6",
                text.c_str());
  }
  return Result::kSuccess;
}

// Every address of every up interface, in the kernel's interface order.
Result list_candidates(int family, std::vector<Candidate>* candidates) {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    return fail(Result::kSystemError, "cannot list network interfaces (getifaddrs): %s",
                strerror(errno));
  }
  for (ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    int entry_family = entry->ifa_addr->sa_family;
    if (entry_family != AF_INET && entry_family != AF_INET6) continue;
    if (family != AF_UNSPEC && entry_family != family) continue;
    SocketAddress address = SocketAddress::from_sockaddr(
        entry->ifa_addr, entry_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (!address.is_set()) continue;
    // IPv4 first; link-local IPv6 last because it only works with its scope (interface) id.
    int preference = entry_family == AF_INET ? 0 : is_link_local_ipv6(address) ? 2 : 1;
    candidates->push_back(
        {entry->ifa_name, address, (entry->ifa_flags & IFF_LOOPBACK) != 0, preference});
  }
  freeifaddrs(interfaces);
  return Result::kSuccess;
}

// The best address of the first interface (in kernel order) that `accept` lets through.
template <typename Accept>
bool choose(const std::vector<Candidate>& candidates, Accept accept, InterfaceAddress* out) {
  const Candidate* best = nullptr;
  for (const Candidate& candidate : candidates) {
    if (!accept(candidate)) continue;
    if (best != nullptr && candidate.name != best->name) continue;
    if (best == nullptr || candidate.preference < best->preference) best = &candidate;
  }
  if (best == nullptr) return false;
  out->interface_name = best->name;
  out->address = best->address;
  return true;
}

}  // namespace

bool interface_name_matches(const std::string& name, const std::string& list) {
  std::string items = list;
  bool exclude = !items.empty() && items[0] == '^';
  if (exclude) items.erase(0, 1);
  bool exact = !items.empty() && items[0] == '=';
  if (exact) items.erase(0, 1);
  bool listed = false;
  size_t start = 0;
  while (start <= items.size() && !listed) {
    size_t comma = items.find(',', start);
    std::string item =
        items.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) listed = exact ? name == item : name.compare(0, item.size(), item) == 0;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !listed : listed;
}

Result find_interface_address(InterfaceAddress* out) {
  int family = AF_UNSPEC;
  TERSE_CHECK(read_family(&family));
  std::vector<Candidate> candidates;
  TERSE_CHECK(list_candidates(family, &candidates));

  const char* variable = "TERSE_SOCKET_IFNAME";
  std::string list = env_string(variable, "");
  if (list.empty()) {
    variable = "NCCL_SOCKET_IFNAME";
    list = env_string(variable, "");
  }
  if (!list.empty()) {
    auto listed = [&](const Candidate& c) { return interface_name_matches(c.name, list); };
    if (choose(candidates, listed, out)) return Result::kSuccess;
    std::string names;
    for (const Candidate& candidate : candidates) {
      if (names.find(candidate.name + " ") == std::string::npos) names += candidate.name + " ";
    }
    return fail(Result::kInvalidArgument,
                "%s=%s matches no up interface with a usable address (up interfaces: %s)", variable,
                list.c_str(), names.empty() ? "none" : names.c_str());
  }
  auto routable = [](const Candidate& c) {
    return !c.loopback && c.name.compare(0, 6, "docker") != 0;
  };
  auto loopback = [](const Candidate& c) { return c.loopback; };
  if (choose(candidates, routable, out)) return Result::kSuccess;
  if (choose(candidates, loopback, out)) {
    TERSE_INFO(
        "no up non-loopback interface; the bootstrap root listens on %s (%s), which "
        "only ranks on this host can reach",
        out->interface_name.c_str(), out->address.to_string().c_str());
    return Result::kSuccess;
  }
  return fail(Result::kSystemError, "no up network interface has an IPv4 or IPv6 address%s",
              family == AF_UNSPEC ? "" : " of the family chosen by TERSE_SOCKET_FAMILY");
}

}  // namespace terse
