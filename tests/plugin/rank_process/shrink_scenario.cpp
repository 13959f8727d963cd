// The shrink scenario (plugin_rank_protocol.h): the survivors of a communicator whose rank 1 is
// gone (killed, or idle for ever) end the allreduce stuck on it, shrink the communicator without
// it, and compute on the new one.
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "plugin_rank_protocol.h"

namespace plugin_test {
namespace {

using Clock = std::chrono::steady_clock;

// A guard against a hang, not a measure: revoking interrupts the stuck call and waits for it to
// return, which takes milliseconds on a quiet machine.
constexpr double kPromptSeconds = 15.0;
constexpr int kVictim = 1;
constexpr size_t kCount = 4099;  // not a multiple of anything an algorithm splits by

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int fail_with(int rank, int code, const std::string& what) {
  fprintf(stderr, "plugin_rank_process rank %d (shrink): %s\n", rank, what.c_str());
  return code;
}

// What rank `rank` of the original communicator contributes: distinct per rank and element, and
// exact in fp32 summed over a few ranks.
float contribution(int rank, size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 977));
}

}  // namespace

int run_shrink(ncclComm_t comm, int rank, int nranks) {
  const char* how_text = getenv("PLUGIN_TEST_SHRINK");
  const std::string how = how_text != nullptr ? how_text : "revoke";
  if (how != "revoke" && how != "abort") {
    return fail_with(rank, kPluginRankBadArguments, "PLUGIN_TEST_SHRINK must be revoke or abort");
  }
  std::vector<float> data(kCount), reduced(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = contribution(rank, i);
  // Once with every rank, so that every connection is up before rank 1 goes.
  if (ncclAllReduce(data.data(), reduced.data(), kCount, ncclFloat32, ncclSum, comm, nullptr) !=
      ncclSuccess) {
    return fail_with(rank, kPluginRankWrongResult,
                     std::string("first allreduce: ") + ncclGetLastError(comm));
  }
  if (rank == kVictim) {
    if (how == "abort") raise(SIGKILL);  // dead: its endpoints close
    for (;;) pause();                    // silent: the test kills it once the others are done
  }

  // An allreduce that cannot complete without rank 1, on a thread of its own.
  std::atomic<bool> returned{false};
  ncclResult_t stuck_result = ncclSuccess;
  std::thread stuck([&] {
    stuck_result =
        ncclAllReduce(data.data(), reduced.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let it block (or fail)

  const Clock::time_point ending = Clock::now();
  int excluded[] = {kVictim};
  ncclComm_t shrunk = nullptr;
  if (how == "revoke") {
    if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) != ncclSuccess) {
      stuck.join();
      return fail_with(rank, kPluginRankWrongResult,
                       std::string("ncclCommRevoke: ") + ncclGetLastError(comm));
    }
    // Revoke returns once quiescent: the stuck call has left terse (its thread may not have
    // stored its result yet), and the state is success again.
    while (!returned && seconds_since(ending) < kPromptSeconds) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!returned) {
      stuck.join();
      return fail_with(rank, kPluginRankAbortTooSlow, "the call went on after ncclCommRevoke");
    }
    ncclResult_t async = ncclInternalError;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess) {
      stuck.join();
      return fail_with(
          rank, kPluginRankWrongResult,
          std::string("after revoke ncclCommGetAsyncError says ") + ncclGetErrorString(async));
    }
    // A revoked communicator refuses collectives and finalize.
    if (ncclAllReduce(data.data(), reduced.data(), kCount, ncclFloat32, ncclSum, comm, nullptr) !=
            ncclInvalidUsage ||
        ncclCommFinalize(comm) != ncclInvalidUsage) {
      stuck.join();
      return fail_with(rank, kPluginRankWrongResult,
                       "a revoked communicator ran an allreduce or finalize");
    }
  }
  const ncclResult_t shrink_result =
      ncclCommShrink(comm, excluded, 1, &shrunk, nullptr,
                     how == "abort" ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  stuck.join();
  const double ended_after = seconds_since(ending);
  if (stuck_result == ncclSuccess) {
    return fail_with(rank, kPluginRankWrongResult, "the allreduce completed without rank 1");
  }
  if (shrink_result != ncclSuccess) {
    return fail_with(rank, kPluginRankWrongResult,
                     std::string("ncclCommShrink: ") + ncclGetErrorString(shrink_result) + ": " +
                         ncclGetLastError(comm));
  }
  if (ended_after > kPromptSeconds) {
    return fail_with(
        rank, kPluginRankAbortTooSlow,
        "ending the stuck call and shrinking took " + std::to_string(ended_after) + " s");
  }

  // The new communicator: the survivors in their old order.
  const int new_rank_expected = rank < kVictim ? rank : rank - 1;
  int count = 0, user_rank = -1;
  if (ncclCommCount(shrunk, &count) != ncclSuccess || count != nranks - 1 ||
      ncclCommUserRank(shrunk, &user_rank) != ncclSuccess || user_rank != new_rank_expected) {
    return fail_with(rank, kPluginRankWrongResult,
                     "the shrunk communicator is rank " + std::to_string(user_rank) + " of " +
                         std::to_string(count) + ", expected " + std::to_string(new_rank_expected) +
                         " of " + std::to_string(nranks - 1));
  }
  for (size_t i = 0; i < kCount; ++i) reduced[i] = -1.0f;
  if (ncclAllReduce(data.data(), reduced.data(), kCount, ncclFloat32, ncclSum, shrunk, nullptr) !=
      ncclSuccess) {
    return fail_with(
        rank, kPluginRankWrongResult,
        std::string("allreduce on the shrunk communicator: ") + ncclGetLastError(shrunk));
  }
  for (size_t i = 0; i < kCount; ++i) {
    float expected = 0.0f;
    for (int r = 0; r < nranks; ++r) {
      if (r != kVictim) expected += contribution(r, i);
    }
    if (reduced[i] != expected) {
      return fail_with(rank, kPluginRankWrongResult,
                       "element " + std::to_string(i) + " is " + std::to_string(reduced[i]) +
                           ", the survivors' sum is " + std::to_string(expected));
    }
  }
  // The parent goes without waiting for rank 1; the new one closes normally.
  const Clock::time_point destroying = Clock::now();
  if (ncclCommDestroy(comm) != ncclSuccess || ncclCommDestroy(shrunk) != ncclSuccess) {
    return fail_with(rank, kPluginRankWrongResult, "ncclCommDestroy failed");
  }
  if (seconds_since(destroying) > kPromptSeconds) {
    return fail_with(rank, kPluginRankAbortTooSlow,
                     "destroying took " + std::to_string(seconds_since(destroying)) + " s");
  }
  fprintf(stderr, "plugin_rank_process rank %d: shrunk to rank %d of %d (%s)\n", rank, user_rank,
          count, how.c_str());
  return kPluginRankOk;
}

}  // namespace plugin_test
