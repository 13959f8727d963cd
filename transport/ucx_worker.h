// The UCX worker of one communicator rank: the progress engine all of that rank's endpoints and
// requests live on. Created with UCS_THREAD_MODE_SERIALIZED: one thread at a time uses it, under
// its owner's lock (the communicator's call lock), which the idle progress thread
// (idle_progress.h) also takes to progress it between calls.
#pragma once

#include <poll.h>
#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "transport/ucx_context.h"

namespace terse {

class UcxWorker {
 public:
  static Result create(std::shared_ptr<UcxContext> context, std::shared_ptr<UcxWorker>* out);

  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h handle() const { return worker_; }

  // The packed address peers create endpoints from (goes into the bootstrap table).
  Result address(std::vector<uint8_t>* bytes) const;

  // One round of ucp_worker_progress; the number of events handled.
  unsigned progress() { return ucp_worker_progress(worker_); }

  // For an idle wait: arms the workers and sleeps on their event descriptors for at most
  // `max_ms`, returning early when UCX signals an event on any of them; returns at once when
  // events are pending. `max_ms` < 0 sleeps without a limit; `extra_fd` (>= 0) is a descriptor
  // that wakes it too. `entries` is the caller's buffer for the poll set, kept across calls (it
  // only grows): a wait sleeps many times per call, and a warm call allocates nothing.
  static void sleep_until_event(const std::vector<UcxWorker*>& workers, int max_ms, int extra_fd,
                                std::vector<pollfd>* entries);
  // The two halves of that: arms every worker (false when one has events pending, or cannot
  // signal them: progress instead), then sleeps on their descriptors for at most `max_ms`. The
  // sleep needs no lock; arming does. `entries` as above.
  static bool arm(const std::vector<UcxWorker*>& workers);
  static void wait_for_event(const std::vector<UcxWorker*>& workers, int max_ms,
                             std::vector<pollfd>* entries);

  // Keeps `object` alive until the worker is destroyed: state that a UCX callback registered on
  // this worker may still reach after its owner is gone (an endpoint's error-handler argument).
  void keep_until_destroyed(std::shared_ptr<void> object) {
    callback_state_.push_back(std::move(object));
  }

 private:
  UcxWorker(std::shared_ptr<UcxContext> context, ucp_worker_h worker, int event_fd)
      : context_(std::move(context)), worker_(worker), event_fd_(event_fd) {}

  std::shared_ptr<UcxContext> context_;  // destroyed after the worker
  ucp_worker_h worker_;
  int event_fd_;  // owned by UCX; -1 when wake-up is unavailable
  std::vector<std::shared_ptr<void>> callback_state_;
};

}  // namespace terse
