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

  // Whether every part finished, or the server let the deadline pass by far (its thread is
  // gone or stalled): then the request is given up and ends with ncclRemoteError.
  bool done();
  // Waits until every part finished, then records a failure's sentence as this thread's last
  // error (ncclGetLastError) and returns the result. The server ends every part by the
  // deadline; a wait that outlives it by far means the server thread is gone: the request is
  // given up and ends with ncclRemoteError, as terse.h says of an owner that does not answer.
  ncclResult_t wait();
  // Runs `write` (the server thread's write into the caller's tensor) unless the request was
  // given up, under the lock that giving up takes: a caller that was told the request ended may
  // free its tensor, so nothing may write into it after. False when given up.
  template <typename Write>
  bool while_waited(Write write) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (given_up_) return false;
    write();
    return true;
  }
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
  bool given_up_ = false;

  bool ended() const {
    return given_up_ || remaining_ <= 0 || (end_at_first_failure_ && result_ != ncclSuccess);
  }
  // Under mutex_: ends the request with ncclRemoteError once the server is late by far.
  void give_up_if_late();
};

}  // namespace terse
