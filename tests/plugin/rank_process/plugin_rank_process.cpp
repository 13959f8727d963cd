// One rank of the plugin's multi-process tests, written as an NCCL application is: only <nccl.h>,
// linked with libterse alone (plugin_rank_protocol.h has the command line and exit codes).
// Checks its own results and reports through its exit code, saying on stderr what went wrong.
#include <nccl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "plugin_rank_protocol.h"
#include "residual_admission_scenario.h"

namespace plugin_test {
namespace {

using Clock = std::chrono::steady_clock;

// How much later than TERSE_TIMEOUT_S an error may come (scheduling on a loaded machine), and
// how long ncclCommAbort may take before it counts as hung: it interrupts and force-closes,
// bounding its own wait by a second, and never waits for peers (a guard, not a measure: a loaded
// machine may take several times as long).
constexpr double kErrorSlackSeconds = 5.0;
constexpr double kAbortSeconds = 15.0;
constexpr int kMaxWrongElementsShown = 3;

int g_rank = -1;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Whether thread `tid` of this process is asleep (state S in /proc: blocked in a system call).
bool thread_sleeps(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t name_end = stat.rfind(')');  // "tid (name) state ...", the name may hold anything
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'S';
}

int report(int code, const std::string& what) {
  fprintf(stderr, "plugin_rank_process rank %d: %s\n", g_rank, what.c_str());
  return code;
}

// TERSE_TIMEOUT_S as terse reads it (600 s when unset).
double timeout_seconds() {
  const char* text = getenv("TERSE_TIMEOUT_S");
  return text != nullptr && atof(text) > 0 ? atof(text) : 600.0;
}

// Counts the elements where got(i) != want(i), describing the first few on stderr.
template <typename T>
int count_wrong(const char* what, const std::vector<T>& got, const std::function<T(size_t)>& want) {
  int wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want(i)) continue;
    if (wrong++ < kMaxWrongElementsShown) {
      report(kPluginRankWrongResult, std::string(what) + ": element " + std::to_string(i) + " is " +
                                         std::to_string(got[i]) + ", expected " +
                                         std::to_string(want(i)));
    }
  }
  return wrong;
}

// Returns kPluginRankWrongResult from the function, saying why, when `call` fails.
#define REQUIRE_NCCL(call)                                                                         \
  do {                                                                                             \
    ncclResult_t result_ = (call);                                                                 \
    if (result_ != ncclSuccess) {                                                                  \
      return report(kPluginRankWrongResult, std::string(#call) +                                   \
                                                " failed: " + ncclGetErrorString(result_) + ": " + \
                                                ncclGetLastError(nullptr));                        \
    }                                                                                              \
  } while (0)

// Every value below is a small integer, exact in every type used, so results compare exactly.
int run_collectives(ncclComm_t comm, int rank, int nranks) {
  int count = -1, user_rank = -1;
  REQUIRE_NCCL(ncclCommCount(comm, &count));
  REQUIRE_NCCL(ncclCommUserRank(comm, &user_rank));
  if (count != nranks || user_rank != rank) {
    return report(kPluginRankWrongResult, "ncclCommCount/UserRank say rank " +
                                              std::to_string(user_rank) + " of " +
                                              std::to_string(count));
  }
  const size_t n = static_cast<size_t>(nranks);
  const int next = (rank + 1) % nranks, previous = (rank + nranks - 1) % nranks;
  int wrong = 0;

  // Allreduce, sum of floats out of place, over 1 MiB and no multiple of anything.
  const size_t big = (size_t{1} << 18) + 3;
  std::vector<float> send(big), sum(big, -1.0f);
  for (size_t i = 0; i < big; ++i) send[i] = static_cast<float>((rank + 1) * (i % 13));
  REQUIRE_NCCL(ncclAllReduce(send.data(), sum.data(), big, ncclFloat32, ncclSum, comm, nullptr));
  wrong += count_wrong<float>("allreduce float32 sum", sum, [&](size_t i) {
    return static_cast<float>(nranks * (nranks + 1) / 2 * (i % 13));
  });

  // Allreduce, max of int32 in place.
  std::vector<int32_t> maximum(1001);
  auto mixed = [](int r, size_t i) { return static_cast<int32_t>((i * 7 + r * 13) % 101); };
  for (size_t i = 0; i < maximum.size(); ++i) maximum[i] = mixed(rank, i);
  REQUIRE_NCCL(ncclAllReduce(maximum.data(), maximum.data(), maximum.size(), ncclInt32, ncclMax,
                             comm, nullptr));
  wrong += count_wrong<int32_t>("allreduce int32 max in place", maximum, [&](size_t i) {
    int32_t best = mixed(0, i);
    for (int r = 1; r < nranks; ++r) best = std::max(best, mixed(r, i));
    return best;
  });

  // Allgather of int32 blocks.
  const size_t block = 1001;
  std::vector<int32_t> mine(block), gathered(n * block, -1);
  for (size_t i = 0; i < block; ++i) mine[i] = rank * 100000 + static_cast<int32_t>(i);
  REQUIRE_NCCL(ncclAllGather(mine.data(), gathered.data(), block, ncclInt32, comm, nullptr));
  wrong += count_wrong<int32_t>("allgather int32", gathered, [&](size_t i) {
    return static_cast<int32_t>(i / block) * 100000 + static_cast<int32_t>(i % block);
  });

  // Broadcast of int64 in place from the last rank.
  const int root = nranks - 1;
  std::vector<int64_t> broadcast(513, -1);
  if (rank == root) {
    for (size_t i = 0; i < broadcast.size(); ++i) broadcast[i] = 3 * static_cast<int64_t>(i) + 1;
  }
  REQUIRE_NCCL(ncclBroadcast(broadcast.data(), broadcast.data(), broadcast.size(), ncclInt64, root,
                             comm, nullptr));
  wrong += count_wrong<int64_t>("broadcast int64 in place", broadcast,
                                [](size_t i) { return 3 * static_cast<int64_t>(i) + 1; });

  // Reduce-scatter: element j of block b is b + j + rank, so rank r's block sums to
  // n * (r + j) + n(n-1)/2.
  std::vector<float> blocks(n * block), part(block, -1.0f);
  for (size_t i = 0; i < blocks.size(); ++i) {
    blocks[i] = static_cast<float>(i / block + i % block + rank);
  }
  REQUIRE_NCCL(
      ncclReduceScatter(blocks.data(), part.data(), block, ncclFloat32, ncclSum, comm, nullptr));
  wrong += count_wrong<float>("reducescatter float32 sum", part, [&](size_t j) {
    return static_cast<float>(nranks * (rank + static_cast<int>(j)) + nranks * (nranks - 1) / 2);
  });

  // A send/recv ring of 1 MiB (past UCX's eager limit) in a group, the receive queued first.
  const size_t ring = (size_t{1} << 20) + 3;
  std::vector<uint8_t> outgoing(ring), incoming(ring, 0);
  auto pattern = [](int r, size_t i) { return static_cast<uint8_t>(r * 31 + i); };
  for (size_t i = 0; i < ring; ++i) outgoing[i] = pattern(rank, i);
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclRecv(incoming.data(), ring, ncclUint8, previous, comm, nullptr));
  REQUIRE_NCCL(ncclSend(outgoing.data(), ring, ncclUint8, next, comm, nullptr));
  REQUIRE_NCCL(ncclGroupEnd());
  wrong += count_wrong<uint8_t>("recv from the previous rank", incoming,
                                [&](size_t i) { return pattern(previous, i); });

  REQUIRE_NCCL(ncclCommFinalize(comm));
  if (wrong > 0) {
    return report(kPluginRankWrongResult, std::to_string(wrong) + " elements were wrong");
  }
  return kPluginRankOk;
}

int run_killed(ncclComm_t comm, int rank, int nranks) {
  const int victim = nranks - 1;
  const double timeout = timeout_seconds();
  const size_t count = 16384;
  std::vector<float> data(count, 1.0f), reduced(count), gathered(count * nranks);
  ncclResult_t result = ncclSuccess;
  double failed_after = 0;
  for (int round = 0; result == ncclSuccess && round < 1000; ++round) {
    Clock::time_point started = Clock::now();
    result = ncclAllReduce(data.data(), reduced.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    if (result == ncclSuccess && reduced[count - 1] != static_cast<float>(nranks)) {
      return report(kPluginRankWrongResult, "allreduce gave " + std::to_string(reduced[0]));
    }
    // Mid-loop, between two collectives, as a crashed process would: no destructor, no close.
    if (rank == victim && round == 2) raise(SIGKILL);
    if (result == ncclSuccess) {
      result = ncclAllGather(data.data(), gathered.data(), count, ncclFloat32, comm, nullptr);
    }
    failed_after = seconds_since(started);
  }
  const std::string message = ncclGetLastError(comm);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm, &async);
  if (result == ncclSuccess && async == ncclSuccess) {
    return report(kPluginRankNoErrorFromDeadPeer, "every round succeeded without the victim");
  }
  if (failed_after > timeout + kErrorSlackSeconds) {
    return report(kPluginRankErrorTooLate,
                  "the error came after " + std::to_string(failed_after) + " s");
  }
  if (result != ncclRemoteError && async != ncclRemoteError) {
    return report(kPluginRankWrongErrorFromDeadPeer,
                  std::string("the call returned ") + ncclGetErrorString(result) +
                      " and ncclCommGetAsyncError " + ncclGetErrorString(async) + ": " + message);
  }
  if (queried != ncclSuccess || async != ncclRemoteError) {
    return report(kPluginRankWrongErrorFromDeadPeer,
                  std::string("ncclCommGetAsyncError did not report the remote error but ") +
                      ncclGetErrorString(async));
  }
  if (message.find("rank") == std::string::npos) {
    return report(kPluginRankWrongErrorFromDeadPeer,
                  "ncclGetLastError names no rank: \"" + message + "\"");
  }
  fprintf(stderr, "plugin_rank_process rank %d: as expected: %s\n", rank, message.c_str());
  Clock::time_point abort_started = Clock::now();
  if (ncclCommAbort(comm) != ncclSuccess) {
    return report(kPluginRankWrongErrorFromDeadPeer, "ncclCommAbort failed");
  }
  if (seconds_since(abort_started) > kAbortSeconds) {
    return report(kPluginRankAbortTooSlow,
                  "ncclCommAbort took " + std::to_string(seconds_since(abort_started)) + " s");
  }
  return kPluginRankOk;
}

int run_abort(ncclComm_t comm, int rank, int nranks) {
  const int idle = nranks - 1;
  std::vector<float> data(1024, 1.0f);
  // Once with every rank, so that every connection is up before the one that never completes.
  REQUIRE_NCCL(
      ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr));
  if (rank == idle) {
    for (;;) pause();  // the test kills this rank once the others are done
  }
  std::atomic<bool> returned{false};
  std::atomic<pid_t> blocked_thread{0};
  ncclResult_t blocked_result = ncclSuccess;
  std::string blocked_message;
  Clock::time_point returned_at;
  std::thread blocked([&] {
    blocked_thread = static_cast<pid_t>(syscall(SYS_gettid));
    blocked_result =
        ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
    blocked_message = ncclGetLastError(nullptr);
    returned_at = Clock::now();
    returned = true;
  });
  // Abort only once the allreduce is under way: an abort before it began would free the
  // communicator it is about to use. Once the thread has said who it is, the first time it sleeps
  // is inside ncclAllReduce (it calls nothing else that blocks); no time slept makes sure of it.
  // The deadline only turns a hang into a failure.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(30);
  while (!returned && (blocked_thread == 0 || !thread_sleeps(blocked_thread)) &&
         Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Another survivor's abort may already have ended the wait with an error; success cannot be.
  if (returned && blocked_result == ncclSuccess) {
    blocked.join();
    return report(kPluginRankWrongResult, "the allreduce completed without the last rank");
  }
  const Clock::time_point abort_started = Clock::now();
  const ncclResult_t aborted = ncclCommAbort(comm);
  const double abort_took = seconds_since(abort_started);
  blocked.join();
  if (aborted != ncclSuccess) return report(kPluginRankWrongResult, "ncclCommAbort failed");
  if (abort_took > kAbortSeconds) {
    return report(kPluginRankAbortTooSlow,
                  "ncclCommAbort took " + std::to_string(abort_took) + " s");
  }
  const double returned_after = std::chrono::duration<double>(returned_at - abort_started).count();
  if (blocked_result == ncclSuccess || returned_after > kAbortSeconds) {
    return report(kPluginRankWrongResult, std::string("the blocked allreduce returned ") +
                                              ncclGetErrorString(blocked_result) + " " +
                                              std::to_string(returned_after) +
                                              " s after the abort began");
  }
  fprintf(stderr,
          "plugin_rank_process rank %d: as expected, the blocked allreduce returned %s: %s\n", rank,
          ncclGetErrorString(blocked_result), blocked_message.c_str());
  return kPluginRankOk;
}

int run_stranger(const ncclUniqueId& id, int rank, int nranks) {
  const double timeout = timeout_seconds();
  ncclComm_t comm = nullptr;
  Clock::time_point started = Clock::now();
  const ncclResult_t result = ncclCommInitRank(&comm, nranks, id, rank);
  const double took = seconds_since(started);
  const std::string message = ncclGetLastError(nullptr);
  if (result == ncclSuccess) {
    ncclCommAbort(comm);
    return report(kPluginRankStrangerAccepted, "ncclCommInitRank accepted a wrong secret");
  }
  if (took > timeout + kErrorSlackSeconds) {
    return report(kPluginRankErrorTooLate, "refused only after " + std::to_string(took) + " s");
  }
  if (message.find("secret") == std::string::npos) {
    return report(kPluginRankWrongErrorFromDeadPeer,
                  "ncclGetLastError does not mention the secret: \"" + message + "\"");
  }
  fprintf(stderr, "plugin_rank_process rank %d: as expected (%s): %s\n", rank,
          ncclGetErrorString(result), message.c_str());
  return kPluginRankOk;
}

int run(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <scenario> <rank> <nranks> <unique id in hex | %s>\n", argv[0],
            kIdFromEnvironment);
    return kPluginRankBadArguments;
  }
  const std::string scenario = argv[1], id_text = argv[4];
  const int rank = atoi(argv[2]), nranks = atoi(argv[3]);
  g_rank = rank;
  // Whatever happens, this process must not outlive a broken test.
  alarm(static_cast<unsigned>(3 * timeout_seconds() + 20));
  ncclUniqueId id;
  if (id_text == kIdFromEnvironment) {
    REQUIRE_NCCL(ncclGetUniqueId(&id));
  } else if (!unique_id_from_hex(id_text, &id)) {
    return report(kPluginRankBadArguments, "the unique id is not 256 hex digits");
  }
  if (scenario == kScenarioStranger) return run_stranger(id, rank, nranks);
  if (scenario == kScenarioInitResult) return run_init_result(id, rank, nranks);
  if (const char* per_node = getenv("PLUGIN_TEST_RANKS_PER_NODE")) {
    // Emulated nodes: TERSE_HOSTID is read when the communicator is created.
    const int ranks_per_node = atoi(per_node) > 0 ? atoi(per_node) : 1;
    setenv("TERSE_HOSTID", ("node" + std::to_string(rank / ranks_per_node)).c_str(), 1);
  }
  if (const char* dir = getenv("PLUGIN_TEST_CODEC_SPEED_DIR")) {
    // A speed table of this rank's own (read when a plan first needs a codec's speed).
    setenv("TERSE_CODEC_SPEED",
           (std::string(dir) + "/rank" + std::to_string(rank) + ".txt").c_str(), 1);
  }

  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    return report(kPluginRankInitFailed,
                  std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
  }
  int code = kPluginRankBadArguments;
  if (scenario == kScenarioCollectives) {
    code = run_collectives(comm, rank, nranks);
  } else if (scenario == kScenarioCompressed) {
    code = run_compressed(comm, rank, nranks);
  } else if (scenario == kScenarioAutoAgreement) {
    code = run_auto_agreement(comm, rank, nranks);
  } else if (scenario == kScenarioSimulate) {
    code = run_simulate(comm, rank, nranks);
  } else if (scenario == kScenarioResidualAdmission) {
    code = run_residual_admission(comm, rank, nranks);
  } else if (scenario == kScenarioKilled) {
    return run_killed(comm, rank, nranks);  // the communicator is aborted there
  } else if (scenario == kScenarioAbort) {
    return run_abort(comm, rank, nranks);
  } else if (scenario == kScenarioShrink) {
    return run_shrink(comm, rank, nranks);  // both communicators are destroyed there
  } else {
    report(code, "unknown scenario " + scenario);
  }
  if (ncclCommDestroy(comm) != ncclSuccess && code == kPluginRankOk) {
    code = report(kPluginRankWrongResult, "ncclCommDestroy failed");
  }
  return code;
}

}  // namespace
}  // namespace plugin_test

int main(int argc, char** argv) {
  return plugin_test::run(argc, argv);
}
