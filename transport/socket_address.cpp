#include "transport/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

#include "common/result.h"

namespace terse {
namespace {

bool parse_port(const std::string& text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  long value = strtol(text.c_str(), nullptr, 10);
  if (value < 1 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

// Splits "host:port" / "[v6]:port". A bare IPv6 address without brackets is refused because its
// last colon cannot be told apart from the port separator.
bool split_host_port(const std::string& text, std::string* host, std::string* port) {
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    *host = text.substr(1, close - 1);
    *port = text.substr(close + 2);
    return !host->empty();
  }
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  return host->find(':') == std::string::npos;
}

}  // namespace

SocketAddress SocketAddress::from_sockaddr(const sockaddr* address, socklen_t length) {
  SocketAddress result;
  if (address == nullptr) return result;
  socklen_t needed = address->sa_family == AF_INET    ? sizeof(sockaddr_in)
                     : address->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                      : 0;
  if (needed == 0 || length < needed) return result;
  memcpy(&result.storage_, address, needed);
  result.length_ = needed;
  return result;
}

Result SocketAddress::parse(const std::string& host_port, const char* source, SocketAddress* out) {
  std::string host, port_text;
  uint16_t port = 0;
  if (!split_host_port(host_port, &host, &port_text) || !parse_port(port_text, &port)) {
    return fail(Result::kInvalidArgument,
                "%s=%s is not host:port (expected e.g. 10.0.0.1:29500, node7:29500 or "
                "[fd00::1]:29500, port 1 to 65535)",
                source, host_port.c_str());
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  int error = getaddrinfo(host.c_str(), nullptr, &hints, &results);
  if (error != 0) {
    return fail(Result::kInvalidArgument, "%s=%s: cannot resolve host '%s' (%s)", source,
                host_port.c_str(), host.c_str(), gai_strerror(error));
  }
  SocketAddress address;
  for (addrinfo* entry = results; entry != nullptr && !address.is_set(); entry = entry->ai_next) {
    address = from_sockaddr(entry->ai_addr, entry->ai_addrlen);
  }
  freeaddrinfo(results);
  if (!address.is_set()) {
    return fail(Result::kInvalidArgument, "%s=%s: host '%s' has no IPv4 or IPv6 address", source,
                host_port.c_str(), host.c_str());
  }
  address.set_port(port);
  *out = address;
  return Result::kSuccess;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SocketAddress::to_string() const {
  char host[NI_MAXHOST] = "";
  if (!is_set() ||
      getnameinfo(get(), length_, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "(unset)";
  }
  std::string port_text = std::to_string(port());
  return family() == AF_INET6 ? "[" + std::string(host) + "]:" + port_text
                              : std::string(host) + ":" + port_text;
}

}  // namespace terse
