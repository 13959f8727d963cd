#include "transport/idle_progress.h"

#include <chrono>

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
  while (!stop_.load()) {
    if (!owner_lock_->try_lock()) {
      std::this_thread::sleep_for(kOwnerBusyBackoff);
      continue;
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
    owner_lock_->unlock();
    if (armed) UcxWorker::wait_for_event(workers_, kSleepMs);
  }
}

}  // namespace terse
