#include "perf/nccl_tests/run_abort.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace terse {
namespace perf {
namespace {

using Clock = std::chrono::steady_clock;

// One rank thread's current call: when it started (0 when idle) and what it is.
struct BusySlot {
  std::atomic<int64_t> since_ns{0};
  std::atomic<const char*> what{""};
};

struct AbortState {
  std::mutex mutex;
  std::vector<ncclComm_t> comms;
  std::atomic<bool> aborting{false};
  std::unique_ptr<BusySlot[]> slots;
  int slot_count = 0;
};

AbortState& state() {
  static AbortState* instance = new AbortState;  // never destroyed: used until _Exit
  return *instance;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// How long abort_run waits for ncclCommAbort before exiting anyway.
constexpr auto kAbortGrace = std::chrono::seconds(5);

}  // namespace

void set_abortable_communicators(const std::vector<ncclComm_t>& comms) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().comms = comms;
}

void abort_run(int code, const std::string& message) {
  AbortState& s = state();
  if (s.aborting.exchange(true)) {
    // Someone else is ending the run; this thread just waits for the exit.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  printf("%s\n", message.c_str());
  fflush(stdout);
  std::vector<ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    comms.swap(s.comms);
  }
  // ncclCommAbort interrupts blocked calls and should return at once; should one block anyway,
  // the exit below does not wait for it past the grace period.
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([comms, done] {
    for (ncclComm_t comm : comms) ncclCommAbort(comm);
    done->store(true);
  }).detach();
  const auto give_up = Clock::now() + kAbortGrace;
  while (!done->load() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

void check_nccl(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return;
  const char* base = strrchr(file, '/');
  char text[2048];
  snprintf(text, sizeof(text), "%s: Test NCCL failure %s:%d '%s / %s' in %s",
           short_host_name().c_str(), base ? base + 1 : file, line, ncclGetErrorString(result),
           ncclGetLastError(nullptr), call);
  abort_run(kExitNcclError, text);
}

void start_watchdog(int timeout_s, int slots) {
  AbortState& s = state();
  s.slots.reset(new BusySlot[static_cast<size_t>(slots)]);
  s.slot_count = slots;
  if (timeout_s <= 0) return;
  std::thread([timeout_s] {
    AbortState& s = state();
    const int64_t limit_ns = static_cast<int64_t>(timeout_s) * 1000000000;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int64_t now = now_ns();
      for (int slot = 0; slot < s.slot_count; ++slot) {
        const int64_t since = s.slots[slot].since_ns.load();
        if (since == 0 || now - since <= limit_ns) continue;
        char text[512];
        snprintf(text, sizeof(text),
                 "%s: Test timeout (%ds) in %s on this process's rank thread %d; aborting the "
                 "communicators",
                 short_host_name().c_str(), timeout_s, s.slots[slot].what.load(), slot);
        abort_run(kExitTimeout, text);
      }
    }
  }).detach();
}

CallTimer::CallTimer(int slot, const char* what) : slot_(slot) {
  AbortState& s = state();
  if (slot_ < 0 || slot_ >= s.slot_count) return;
  s.slots[slot_].what.store(what);
  s.slots[slot_].since_ns.store(now_ns());
}

CallTimer::~CallTimer() {
  AbortState& s = state();
  if (slot_ < 0 || slot_ >= s.slot_count) return;
  s.slots[slot_].since_ns.store(0);
}

std::string short_host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  const size_t dot = host.find('.');
  return dot == std::string::npos ? host : host.substr(0, dot);
}

}  // namespace perf
}  // namespace terse
