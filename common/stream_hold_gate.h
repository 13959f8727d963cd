// Whether the running thread may allocate, free or load on a CUDA device now.
//
// The device route (plugin/device_staging.h) holds the caller's stream until the proxy thread has
// run the collective. Measured on an H200 (perf/RESULTS.md, "First GPU runs"): while a stream is
// held, cudaFree, cudaFreeHost and cuBLAS's handle creation and first GEMM wait for it; a kernel's
// first (lazy) load makes other streams wait for it; and cudaMalloc waits for a lock that any
// application thread copying a result into pageable memory on the held stream keeps until the
// hold ends. Each is a deadlock when the proxy makes it. So the proxy runs a held call inside a
// StreamHoldScope, and every place that would allocate or free device or pinned memory asks
// allocation_allowed() first: allocation fails with a clear error instead (the device route then
// runs that tensor's next call without a hold), and frees wait in a list until a thread that
// holds nothing releases them (release_deferred).
//
// Nothing here calls CUDA: what to release is a function the caller gives.
#pragma once

#include <functional>

namespace terse {

// Marks the calling thread as running work whose caller's stream is held, for its lifetime.
class StreamHoldScope {
 public:
  StreamHoldScope();
  ~StreamHoldScope();
  StreamHoldScope(const StreamHoldScope&) = delete;
  StreamHoldScope& operator=(const StreamHoldScope&) = delete;

 private:
  bool outer_;
};

// False inside a StreamHoldScope of this thread.
bool allocation_allowed();

// Counts this thread's allocations (require_allocation_allowed calls note_allocation before
// each): a call that allocated may allocate again next time, so it is not run under a hold yet.
// `what` (a string literal, or null) is kept as the thread's latest, for the log.
void note_allocation(const char* what = nullptr);
unsigned long long allocations_on_this_thread();
// What this thread's latest allocation was ("" when none or unnamed).
const char* latest_allocation_on_this_thread();

// Runs `release` now where allocation_allowed(), else queues it for release_deferred().
void release_when_allowed(std::function<void()> release);

// Runs every queued release (of any thread), where allocation_allowed(); returns how many ran.
int release_deferred();

// Releases queued and not yet run (tests).
int deferred_release_count();

}  // namespace terse
