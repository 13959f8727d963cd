// Helpers for the transport tests: environment overrides that undo themselves, N ranks as
// threads, a free TCP port.
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

// A TCP port that was free a moment ago on `host` (an IPv4 or IPv6 literal); 0 on failure.
int free_tcp_port(const char* host);

}  // namespace test
}  // namespace terse
