// A lone device-buffer allreduce on the device backend (backend_route.h): the proxy runs it while
// the caller's stream is held (run_on_backend), or, for a shape's first call and for ranks that
// share a process, in its turn without a hold (run_without_hold).
#include "plugin/device_staging.h"

#include <memory>
#include <mutex>
#include <string>

#include "collectives/communicator.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"
#include "plugin/device_staging_internal.h"
#include "plugin/stream_wait.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

#if TERSE_HAVE_CUDA

ncclResult_t DeviceStaging::run_on_backend(const QueuedCall& call) {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  CurrentDevice current(device_);
  if (current.result() != cudaSuccess) {
    return cuda_failure(current.result(), "cudaSetDevice for the communicator's device", device_);
  }
  TERSE_CHECK(refuse_capture(call.stream));
  if (backend_ == nullptr) TERSE_CHECK(BackendRoute::create(engine_, device_, pinned_, &backend_));
  // Ranks sharing this process never hold (another_rank_in_this_process): each call returns
  // once it ran, as a shape's first calls always do.
  if (shares_process_ || !backend_->ran_before(call.args)) return run_without_hold(call);
  // Set before the unit is marked ready, read by the proxy after (as Batch::cancelled).
  struct Cancel {
    bool cancelled = false;
    ncclResult_t result = ncclSuccess;
    std::string message;
  };
  auto cancel = std::make_shared<Cancel>();
  Communicator* engine = engine_;
  BackendRoute* route = backend_.get();
  const CollectiveArgs args = call.args;
  auto work = [engine, route, args, cancel]() -> ncclResult_t {
    // The caller's stream is held until this returns: nothing may allocate, free or load.
    StreamHoldScope hold;
    const ncclResult_t result =
        cancel->cancelled
            ? static_cast<ncclResult_t>(fail(cancel->result, "%s", cancel->message.c_str()))
            : route->run(args);
    // The caller already returned success: a failure reaches ncclCommGetAsyncError.
    if (result != ncclSuccess) engine->break_with(result);
    return result;
  };
  std::shared_ptr<StreamProxy::Unit> unit;
  uint32_t sequence = 0;
  TERSE_CHECK(proxy_->enqueue(work, /*ready=*/false, &unit, &sequence));
  auto* ticket = new std::shared_ptr<StreamProxy::Unit>(unit);
  cudaError_t error = cudaLaunchHostFunc(call.stream, inputs_staged, ticket);
  if (error != cudaSuccess) {
    delete ticket;
    cancel->cancelled = true;
    cancel->result = cuda_failure(error, "cudaLaunchHostFunc", device_);
    cancel->message = last_error();
    StreamProxy::mark_ready(unit);
    return cancel->result;
  }
  const ncclResult_t waited = waiter_->wait(call.stream, sequence);
  // Without the wait the stream would read the result early: the communicator is broken.
  if (waited != ncclSuccess) engine_->break_with(waited);
  return waited;
}

ncclResult_t DeviceStaging::run_without_hold(const QueuedCall& call) {
  // Pinned staging for the proxy in case it must stage a later call of this shape after all (a
  // plan the backend cannot run, backend_route.h): there, with the stream held, it may not
  // allocate any. Made here, before the collective: no peer of this process can be waiting on
  // a held stream of this shape yet, and cudaHostAlloc waits for any that copies into pageable
  // memory from one.
  PinnedStaging::Block reserved;
  TERSE_CHECK(pinned_->acquire(backend_->staging_layout(call.args).bytes, &reserved));
  pinned_->release(reserved);
  // The inputs: everything the caller queued on the stream before the call.
  const cudaError_t error = cudaStreamSynchronize(call.stream);
  if (error != cudaSuccess)
    return cuda_failure(error, "cudaStreamSynchronize of the call's stream", device_);
  Communicator* engine = engine_;
  BackendRoute* route = backend_.get();
  const CollectiveArgs args = call.args;
  bool cancelled = false;
  const ncclResult_t result = proxy_->run_in_order(
      [engine, route, args]() -> ncclResult_t {
        // Nothing is held by this call: the place for frees that waited for one.
        release_deferred();
        const ncclResult_t ran = route->run(args);
        if (ran != ncclSuccess) engine->break_with(ran);
        return ran;
      },
      &cancelled);
  if (cancelled) engine_->break_with(result);
  return result;
}

#else  // !TERSE_HAVE_CUDA

ncclResult_t DeviceStaging::run_on_backend(const QueuedCall&) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}
ncclResult_t DeviceStaging::run_without_hold(const QueuedCall&) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
