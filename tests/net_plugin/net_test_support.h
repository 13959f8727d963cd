// What the net plugin tests share: the plugin loaded for one version (once per process: NCCL
// loads it once too), a logger that keeps NCCL-style lines for the tests to read, and a pair of
// comms in each direction made through one listen comm.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "plugin/net/driver/loaded_net.h"
#include "plugin/net/driver/net_traffic.h"

namespace terse::test {

// The plugin with its ncclNetPlugin_v<version> table, initialised with capture_logger.
LoadedNet& net_for_version(int version);

// NCCL's logger signature; lines kept in captured_lines().
void capture_logger(netabi::LogLevel level, unsigned long flags, const char* file, int line,
                    const char* format, ...);
std::vector<std::string> captured_lines();

struct CommPair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  unsigned char handle[netabi::kHandleMaxBytes] = {};
};

// listen on device 0, then connect and accept from one thread.
std::string open_pair(LoadedNet& net, CommPair* pair);
std::string close_pair(LoadedNet& net, CommPair* pair);

}  // namespace terse::test
