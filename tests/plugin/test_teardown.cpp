// Teardown as a long-running job sees it: ncclCommAbort from another thread while a call is
// blocked inside the communicator returns at once and frees nothing that call still uses, and
// a thousand init/destroy cycles leave the thread count, the mapped memory and the resident
// memory where they were.
#include <dirent.h>
#include <nccl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "transport_test_support.h"

namespace {

using Clock = std::chrono::steady_clock;
using terse::test::ScopedEnv;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A field of /proc/self/status ("Threads", "VmRSS", "VmSize"), in its own unit (kB for memory).
long status_field(const char* name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(name) + ":";
  while (std::getline(status, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

// How many of this process's threads carry `name` (terse names its background threads).
int threads_named(const std::string& name) {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string thread_name;
    std::getline(comm, thread_name);
    count += thread_name == name;
  }
  closedir(tasks);
  return count;
}

// Destroys close in the background ("terse-close" threads): figures are compared where none
// runs. Bounded, so that a close that never ends fails the test instead of hanging it.
bool wait_for_closes(double seconds) {
  const Clock::time_point start = Clock::now();
  while (threads_named("terse-close") > 0) {
    if (seconds_since(start) > seconds) return false;
    std::this_thread::yield();
  }
  return true;
}

long gettid_now() {
  return static_cast<long>(::gettid());
}

// Whether thread `tid` of this process is blocked waiting for events (poll, ppoll, epoll_wait,
// epoll_pwait, select): where a call that waits for a peer sits. /proc/.../syscall holds the
// number of the system call a blocked thread is in.
bool waiting_for_events(long tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  file >> number;
  return number == 7 || number == 271 || number == 232 || number == 281 || number == 23;
}

// Starts `call` on a thread and returns once that thread waits for events inside it (the
// call is then blocked inside the communicator, waiting for a peer that will not come).
class BlockedCall {
 public:
  explicit BlockedCall(std::function<ncclResult_t()> call) {
    thread_ = std::thread([this, call] {
      tid_.store(gettid_now());
      result_.store(call());
      done_.store(true);
    });
    const Clock::time_point start = Clock::now();
    // Bounded: a call that never blocks fails the test below instead of hanging it.
    while (!done_.load() && seconds_since(start) < 20) {
      const long tid = tid_.load();
      if (tid != 0 && waiting_for_events(tid)) {
        blocked_ = true;
        break;
      }
      std::this_thread::yield();
    }
  }
  ~BlockedCall() {
    if (thread_.joinable()) thread_.join();
  }
  bool blocked() const { return blocked_; }
  // Waits for the call to return and gives its result.
  ncclResult_t finish() {
    thread_.join();
    return result_.load();
  }

 private:
  std::thread thread_;
  std::atomic<long> tid_{0};
  std::atomic<ncclResult_t> result_{ncclInternalError};
  std::atomic<bool> done_{false};
  bool blocked_ = false;
};

class Teardown : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  // Long enough that a call blocked on an absent peer is still blocked when the abort comes.
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "30"};

  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(comms_, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }

  // Aborts rank 0 while `blocked` runs on it (rank 1 stays away) and checks that the abort
  // returns within a second and the blocked call soon after, with an error.
  void abort_while_blocked(BlockedCall* blocked) {
    ASSERT_TRUE(blocked->blocked()) << "the call did not block waiting for rank 1";
    const Clock::time_point start = Clock::now();
    EXPECT_EQ(ncclCommAbort(comms_[0]), ncclSuccess);
    const double abort_seconds = seconds_since(start);
    EXPECT_NE(blocked->finish(), ncclSuccess);
    const double call_seconds = seconds_since(start);
    // The figure (the issue asks for under 1 s) is printed, not asserted; the guards only tell
    // an abort that returns from one that waits out the blocked call's 30 s deadline.
    printf("ncclCommAbort returned after %.3f s; the blocked call after %.3f s\n", abort_seconds,
           call_seconds);
    EXPECT_LT(abort_seconds, 15.0) << "ncclCommAbort waited for the blocked call";
    EXPECT_LT(call_seconds, 15.0) << "the blocked call outlived the abort";
    EXPECT_EQ(ncclCommAbort(comms_[1]), ncclSuccess);
  }

  ncclComm_t comms_[2] = {};
};

TEST_F(Teardown, AbortReturnsAtOnceWhileAnotherThreadIsInsideAnAllReduce) {
  std::vector<float> data(1 << 16, 1.0f);
  BlockedCall blocked([&] {
    return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comms_[0],
                         nullptr);
  });
  abort_while_blocked(&blocked);
}

TEST_F(Teardown, AbortReturnsAtOnceWhileAnotherThreadIsInsideASplit) {
  // Split holds the communicator's call lock while it exchanges the new ids; before, the abort
  // waited for that lock until the exchange timed out.
  ncclComm_t child = nullptr;
  BlockedCall blocked([&] { return ncclCommSplit(comms_[0], 0, 0, &child, nullptr); });
  abort_while_blocked(&blocked);
  EXPECT_EQ(child, nullptr);
}

// Init and destroy, over and over: what a job that rebuilds communicators does for days.
TEST(TeardownCycles, AThousandInitDestroyCyclesKeepThreadsAndMemoryFlat) {
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnv family("TERSE_SOCKET_FAMILY", "AF_INET");
  constexpr int kCycles = 1000;
  constexpr int kWarmUp = 100;
  long threads_after_warm_up = 0, vm_after_warm_up = 0, rss_after_warm_up = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ncclComm_t comm = nullptr;
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
    int value = cycle;
    ASSERT_EQ(ncclAllReduce(&value, &value, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(value, cycle);
    ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
    if (cycle + 1 == kWarmUp) {
      ASSERT_TRUE(wait_for_closes(30)) << "a communicator's close did not finish";
      threads_after_warm_up = status_field("Threads");
      vm_after_warm_up = status_field("VmSize");
      rss_after_warm_up = status_field("VmRSS");
    }
  }
  ASSERT_TRUE(wait_for_closes(30)) << "a communicator's close did not finish";
  // A closed communicator's other threads (its progress thread, UCX's) may still be on their
  // way out on a loaded machine: wait for them, bounded. One that never exits fails below.
  const Clock::time_point start = Clock::now();
  while (status_field("Threads") > threads_after_warm_up && seconds_since(start) < 30) {
    std::this_thread::yield();
  }
  const long threads = status_field("Threads");
  const long vm = status_field("VmSize");
  const long rss = status_field("VmRSS");
  printf("after %d cycles: threads %ld -> %ld, VmSize %ld -> %ld kB, VmRSS %ld -> %ld kB\n",
         kCycles, threads_after_warm_up, threads, vm_after_warm_up, vm, rss_after_warm_up, rss);
  // With every close finished nothing may accumulate. A finished closing thread that was never
  // joined keeps its 8 MiB stack mapped: 900 of them would add 7 GiB to VmSize. The margin allows
  // for malloc arenas (64 MiB of address space each, at most 8 per core), which more threads
  // alive at once on a loaded machine create once and keep: 2 appeared in a run at load 13.
  EXPECT_LE(threads, threads_after_warm_up);
  EXPECT_LT(vm, vm_after_warm_up + vm_after_warm_up / 20 + 256 * 1024);
  EXPECT_LT(rss, rss_after_warm_up + rss_after_warm_up / 20 + 4 * 1024);
}

}  // namespace
