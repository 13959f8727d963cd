#include "transport/idle_progress.h"

#include <chrono>

#include "common/exception_guard.h"
#include "common/result.h"
#include "common/thread_name.h"

namespace terse {
namespace {

// How long the thread sleeps on the event descriptors before looking at the stop flag again,
// and how long it backs off while the owner holds the lock (the owner progresses then).
constexpr int kSleepMs = 50;
constexpr std::chrono::milliseconds kOwnerBusyBackoff{5};
// Progress rounds per turn at most, so that an owner waiting for the lock is not kept out long.
constexpr int kMaxRoundsPerTurn = 64;

}  // namespace

IdleProgress::IdleProgress(std::vector<UcxWorker*> workers, std::mutex* owner_lock)
    : workers_(std::move(workers)), owner_lock_(owner_lock) {
  thread_ = std::thread([this] { run(); });
}

IdleProgress::~IdleProgress() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void IdleProgress::run() {
  name_this_thread("terse-progress");
  std::vector<pollfd> poll_entries;  // the sleeps' poll set, reused
  while (!stop_.load()) {
    bool owner_busy = false;
    // An exception (out of memory in a completion callback, or here) must not end the thread,
    // nor leave the owner's lock held: it is recorded, and the next turn goes on.
    const Result turn_result = call_guarded("the idle progress thread", [&] {
      std::unique_lock<std::mutex> turn(*owner_lock_, std::try_to_lock);
      if (!turn.owns_lock()) {
        owner_busy = true;
        return Result::kSuccess;
      }
      bool armed = false;
      for (int round = 0; round < kMaxRoundsPerTurn && !stop_.load(); ++round) {
        unsigned events = 0;
        for (UcxWorker* worker : workers_) events += worker->progress();
        rounds_.fetch_add(1, std::memory_order_relaxed);
        if (events != 0) continue;
        armed = UcxWorker::arm(workers_);
        if (armed) break;
      }
      turn.unlock();
      if (armed) UcxWorker::wait_for_event(workers_, kSleepMs, &poll_entries);
      return Result::kSuccess;
    });
    if (owner_busy) std::this_thread::sleep_for(kOwnerBusyBackoff);
    if (turn_result != Result::kSuccess)
      std::this_thread::sleep_for(std::chrono::milliseconds(kSleepMs));
  }
}

}  // namespace terse
