// N communicators as threads of this process, each with its own real UCX transport on IPv4
// loopback: the harness of the communicator, group, split and collective tests. Inputs,
// references and tolerances come from allreduce_test_support.h (the same values and bounds
// serve every reducing collective).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"

namespace terse {
namespace test {

class CommunicatorWorld {
 public:
  // Creates `nranks` communicators (one thread per rank) with `settings` (name, value) set in
  // the environment while they read it, on top of the loopback bootstrap settings and
  // TERSE_TIMEOUT_S=30 (unless already set). Check ok() after.
  explicit CommunicatorWorld(int nranks,
                             const std::vector<std::pair<std::string, std::string>>& settings = {});
  // Destroys the communicators, all ranks at once (closing flushes towards the others).
  ~CommunicatorWorld();
  CommunicatorWorld(const CommunicatorWorld&) = delete;
  CommunicatorWorld& operator=(const CommunicatorWorld&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int nranks() const { return static_cast<int>(comms_.size()); }
  Communicator& comm(int rank) { return *comms_[static_cast<size_t>(rank)]; }
  std::unique_ptr<Communicator>& slot(int rank) { return comms_[static_cast<size_t>(rank)]; }

  // Runs body(comm) for every rank on its own thread and joins them.
  void run(const std::function<void(Communicator& comm)>& body);

 private:
  std::vector<std::unique_ptr<Communicator>> comms_;
  bool ok_ = true;
  std::string error_;
};

// Sets environment variables for a scope, restoring them after (only while no rank thread
// reads them). A null value unsets.
class EnvironmentSettings {
 public:
  explicit EnvironmentSettings(const std::vector<std::pair<std::string, const char*>>& settings);
  ~EnvironmentSettings();
  EnvironmentSettings(const EnvironmentSettings&) = delete;
  EnvironmentSettings& operator=(const EnvironmentSettings&) = delete;

 private:
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

// The loopback bootstrap settings every multi-rank test uses.
std::vector<std::pair<std::string, const char*>> loopback_settings();

}  // namespace test
}  // namespace terse
