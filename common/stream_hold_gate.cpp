#include "common/stream_hold_gate.h"

#include <mutex>
#include <utility>
#include <vector>

namespace terse {
namespace {

thread_local bool holding = false;
thread_local unsigned long long allocations = 0;
thread_local const char* latest_allocation = "";

std::mutex& deferred_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<std::function<void()>>& deferred() {
  static auto* list = new std::vector<std::function<void()>>();  // outlives static destructors
  return *list;
}

}  // namespace

StreamHoldScope::StreamHoldScope() : outer_(!holding) {
  holding = true;
}

StreamHoldScope::~StreamHoldScope() {
  if (outer_) holding = false;
}

bool allocation_allowed() {
  return !holding;
}

void note_allocation(const char* what) {
  ++allocations;
  latest_allocation = what != nullptr ? what : "";
}

const char* latest_allocation_on_this_thread() {
  return latest_allocation;
}

unsigned long long allocations_on_this_thread() {
  return allocations;
}

void release_when_allowed(std::function<void()> release) {
  if (!release) return;
  if (allocation_allowed()) {
    release();
    return;
  }
  std::lock_guard<std::mutex> lock(deferred_mutex());
  deferred().push_back(std::move(release));
}

int release_deferred() {
  if (!allocation_allowed()) return 0;
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex());
    due.swap(deferred());
  }
  for (auto& release : due) release();
  return static_cast<int>(due.size());
}

int deferred_release_count() {
  std::lock_guard<std::mutex> lock(deferred_mutex());
  return static_cast<int>(deferred().size());
}

}  // namespace terse
