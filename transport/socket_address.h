// An IPv4 or IPv6 socket address (with port), the unit the bootstrap passes around: the root's
// listening address inside the unique id, the value of NCCL_COMM_ID, a peer in a log line.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/result.h"

namespace terse {

class SocketAddress {
 public:
  SocketAddress() = default;

  // Copies an AF_INET or AF_INET6 address; anything else gives an address with is_set() false.
  static SocketAddress from_sockaddr(const sockaddr* address, socklen_t length);

  // Parses "host:port" or "[ipv6]:port", resolving host names with getaddrinfo (first answer
  // wins). `source` names where the text came from (e.g. "NCCL_COMM_ID") for the error message.
  static Result parse(const std::string& host_port, const char* source, SocketAddress* out);

  bool is_set() const { return length_ != 0; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }

  // "192.0.2.1:5000" or "[fd00::1%2]:5000"; "(unset)" when empty.
  std::string to_string() const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

}  // namespace terse
