// One request of the parameter server's C API (tersePsSend, tersePsReceive, tersePsClock): its
// parts, one per owner message, finish on the server thread; tersePsSync and tersePsTest read
// the outcome on the caller's. The first failure of any part is the request's.
#pragma once

#include <nccl.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include "transport/deadline.h"

namespace terse {

class PsRequest {
 public:
  // `parts` messages must finish; the server fails each by `deadline` at the latest. With
  // `end_at_first_failure` the request ends as soon as one part fails (sends and clocks: their
  // other parts touch no buffer of the caller's); a receive waits for every part, since each
  // writes into the caller's tensor until it ends.
  PsRequest(int parts, Deadline deadline, bool end_at_first_failure)
      : remaining_(parts), deadline_(deadline), end_at_first_failure_(end_at_first_failure) {}

  // One part finished (from the server thread); the first failure's result and sentence stay.
  void finish_part(ncclResult_t result, const std::string& message);

  // Whether every part finished.
  bool done() const;
  // Waits until every part finished, then records a failure's sentence as this thread's last
  // error (ncclGetLastError) and returns the result. The server ends every part by the
  // deadline; a wait that outlives it by far means the server thread is gone, and fails.
  ncclResult_t wait();
  // For a request done(): its outcome, the sentence recorded as wait() records it.
  ncclResult_t outcome() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  int remaining_;
  ncclResult_t result_ = ncclSuccess;
  std::string message_;
  Deadline deadline_;
  bool end_at_first_failure_;

  bool ended() const {
    return remaining_ <= 0 || (end_at_first_failure_ && result_ != ncclSuccess);
  }
};

}  // namespace terse
