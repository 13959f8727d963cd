#include "transport/ucx_worker.h"

#include <poll.h>
#include <sched.h>

#include <cstring>

#include "common/log.h"
#include "common/result.h"

namespace terse {

Result UcxWorker::create(std::shared_ptr<UcxContext> context, std::shared_ptr<UcxWorker>* out) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h worker = nullptr;
  ucs_status_t status = ucp_worker_create(context->handle(), &params, &worker);
  if (status != UCS_OK) {
    return fail(Result::kSystemError, "UCX cannot create a worker: %s", ucs_status_string(status));
  }
  int event_fd = -1;
  status = ucp_worker_get_efd(worker, &event_fd);
  if (status != UCS_OK) {
    // Still correct, only busier: idle waits then yield the core instead of sleeping.
    TERSE_INFO("UCX worker has no event descriptor (%s); idle waits will poll",
               ucs_status_string(status));
    event_fd = -1;
  }
  out->reset(new UcxWorker(std::move(context), worker, event_fd));
  return Result::kSuccess;
}

UcxWorker::~UcxWorker() {
  ucp_worker_destroy(worker_);
  callback_state_.clear();  // no callback can run any more
}

Result UcxWorker::address(std::vector<uint8_t>* bytes) const {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
  if (status != UCS_OK) {
    return fail(Result::kSystemError, "UCX cannot report the worker address: %s",
                ucs_status_string(status));
  }
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(address);
  bytes->assign(begin, begin + length);
  ucp_worker_release_address(worker_, address);
  return Result::kSuccess;
}

void UcxWorker::sleep_until_event(const std::vector<UcxWorker*>& workers, int max_ms, int extra_fd,
                                  std::vector<pollfd>* entries) {
  // clear() keeps the capacity: once the buffer has held this many descriptors, no allocation.
  entries->clear();
  entries->reserve(workers.size() + 1);
  for (UcxWorker* worker : workers) {
    ucs_status_t status = UCS_ERR_UNSUPPORTED;
    if (worker->event_fd_ >= 0 && max_ms != 0) {
      // UCX only signals the descriptor for events that arrive after arming; BUSY means some are
      // already pending and the caller should progress instead.
      status = ucp_worker_arm(worker->worker_);
      if (status == UCS_ERR_BUSY) return;
    }
    if (status != UCS_OK) {
      // No wake-up from this worker: a short nap on the extra descriptor (work handed over
      // still wakes it), else a yield, and the caller polls again.
      if (extra_fd >= 0 && max_ms != 0) {
        pollfd extra{extra_fd, POLLIN, 0};
        poll(&extra, 1, 1);
      } else {
        sched_yield();
      }
      return;
    }
    entries->push_back(pollfd{worker->event_fd_, POLLIN, 0});
  }
  if (extra_fd >= 0) entries->push_back(pollfd{extra_fd, POLLIN, 0});
  if (!entries->empty()) poll(entries->data(), entries->size(), max_ms < 0 ? -1 : max_ms);
}

bool UcxWorker::arm(const std::vector<UcxWorker*>& workers) {
  for (UcxWorker* worker : workers) {
    if (worker->event_fd_ < 0) return false;
    if (ucp_worker_arm(worker->worker_) != UCS_OK) return false;
  }
  return true;
}

void UcxWorker::wait_for_event(const std::vector<UcxWorker*>& workers, int max_ms,
                               std::vector<pollfd>* entries) {
  entries->clear();
  entries->reserve(workers.size());
  for (UcxWorker* worker : workers) entries->push_back(pollfd{worker->event_fd_, POLLIN, 0});
  if (!entries->empty()) poll(entries->data(), entries->size(), max_ms);
}

}  // namespace terse
