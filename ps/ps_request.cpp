#include "ps/ps_request.h"

#include <chrono>

#include "common/result.h"

namespace terse {
namespace {

// Beyond its deadline the server has this long to report a part: it checks deadlines every
// few milliseconds, so only a server thread that stopped takes longer.
constexpr auto kServerGrace = std::chrono::seconds(5);

}  // namespace

void PsRequest::finish_part(ncclResult_t result, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (result != ncclSuccess && result_ == ncclSuccess) {
    result_ = result;
    message_ = message;
  }
  --remaining_;
  if (ended()) finished_.notify_all();
}

void PsRequest::give_up_if_late() {
  if (ended() || Deadline::Clock::now() < deadline_.when() + kServerGrace) return;
  given_up_ = true;
  if (result_ == ncclSuccess) {
    result_ = ncclRemoteError;
    message_ =
        "tersePs: the request was not answered or failed by its deadline (TERSE_TIMEOUT_S); the "
        "parameter server's thread is not running";
  }
}

bool PsRequest::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  give_up_if_late();
  return ended();
}

ncclResult_t PsRequest::wait() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait_until(lock, deadline_.when() + kServerGrace, [&] { return ended(); });
    give_up_if_late();
  }
  return outcome();
}

ncclResult_t PsRequest::outcome() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (result_ == ncclSuccess) return ncclSuccess;
  return fail(result_, "%s", message_.c_str());
}

}  // namespace terse
