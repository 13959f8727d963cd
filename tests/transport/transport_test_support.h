// Helpers for the transport tests: environment overrides that undo themselves, N ranks as
// threads, a TCP port held for a test.
#pragma once

#include <functional>
#include <string>

namespace terse {
namespace test {

// Sets (or, with nullptr, unsets) a variable for the scope and restores it afterwards. Only
// change the environment while no rank thread runs.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_value_;
  std::string old_value_;
};

// Runs body(rank) for every rank on its own thread and joins them all.
void run_ranks(int nranks, const std::function<void(int rank)>& body);

// A TCP port on `host` (an IPv4 or IPv6 literal), bound by this object until it is destroyed and
// never listening: for the tests of an address fixed before any rank starts (TERSE_COMM_ID).
// It is bound without SO_REUSEADDR, so no other process can take it (nor does bind to port 0 or
// connect() ever pick it), then given SO_REUSEADDR, so that the bootstrap root, which sets it
// too, can bind and listen on it: Linux lets a listener share a port with sockets that do not
// listen. Until the root listens, connecting to it is refused as to a free port. (A port found
// free and released at once could be taken by another process before the root binds it.)
class ReservedPort {
 public:
  explicit ReservedPort(const char* host);
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  int port() const { return port_; }  // 0 when none could be bound (e.g. no IPv6 loopback)

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace test
}  // namespace terse
