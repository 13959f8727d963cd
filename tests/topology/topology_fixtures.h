// The XML fixtures of tests/topology/fixtures, found by absolute path (TERSE_TOPOLOGY_FIXTURES,
// set by tests/CMakeLists.txt), and a scoped environment variable for the settings tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/result.h"
#include "topology/machine_topology.h"

namespace terse {

inline std::string fixture_path(const char* name) {
  return std::string(TERSE_TOPOLOGY_FIXTURES) + "/" + name;
}

// Loads a fixture or fails the test with the library's message.
inline MachineTopology load_fixture(const char* name) {
  MachineTopology topology;
  EXPECT_EQ(load_machine_topology(fixture_path(name), &topology), Result::kSuccess) << last_error();
  return topology;
}

// Sets (or unsets, with nullopt) an environment variable for one scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace terse
