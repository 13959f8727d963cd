// How the parameter-server tests (tests/ps, tests/ps_schemes) run ranks as processes: one
// program per rank on IPv4 loopback, a fresh unique id on its command line and per-run settings
// in its environment, with the environment a test must not inherit cleared.
#pragma once

#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

#include "common/hex_bytes.h"
#include "rank_processes.h"
#include "transport_test_support.h"

namespace terse {
namespace test {

// Environment variables for the ranks of one run, as NAME, value.
using Settings = std::vector<std::pair<std::string, std::string>>;

// Runs `program scenario RANK NRANKS ID` for every rank, under `env` with `settings`.
inline std::vector<RankProcessResult> run_ps_ranks(const char* program, const char* scenario,
                                                   int nranks, const Settings& settings,
                                                   double seconds_allowed, int expendable = -1) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  const std::string hex = terse::bytes_to_hex(id.internal, sizeof(id.internal));
  std::vector<CommandLine> ranks;
  for (int rank = 0; rank < nranks; ++rank) {
    CommandLine line = {"/usr/bin/env"};
    for (const auto& [name, value] : settings) line.push_back(name + "=" + value);
    line.insert(line.end(), {program, scenario, std::to_string(rank), std::to_string(nranks), hex});
    ranks.push_back(line);
  }
  return run_processes(ranks, seconds_allowed, expendable);
}

inline void expect_all_exited_ok(const std::vector<RankProcessResult>& results, int nranks) {
  ASSERT_EQ(results.size(), size_t(nranks));
  for (const RankProcessResult& result : results) {
    EXPECT_TRUE(result.exited && result.exit_code == 0) << describe(result);
  }
}

// Loopback rendezvous, no inherited id, codec or policy, and every request's deadline.
struct PsRankEnvironment {
  explicit PsRankEnvironment(int timeout_seconds)
      : timeout{"TERSE_TIMEOUT_S", std::to_string(timeout_seconds).c_str()} {}
  ScopedEnv ifname{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id{"NCCL_COMM_ID", nullptr};
  ScopedEnv codec{"TERSE_CODEC", nullptr};
  ScopedEnv policy{"TERSE_POLICY", nullptr};
  ScopedEnv timeout;
};

}  // namespace test
}  // namespace terse
