// A communicator's DeviceStaging made and ended: its device, pinned flag, stream waiter and proxy
// thread, finish and destruction, and the graph-capture check every enqueue makes.
#include "plugin/device_staging.h"

#include <memory>
#include <utility>

#include "collectives/communicator.h"
#include "common/result.h"
#include "plugin/device_staging_internal.h"
#include "plugin/stream_wait.h"
#include "transport/process_identity.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

#if TERSE_HAVE_CUDA

namespace {

// Whether another rank of the communicator runs in this process (ranks as threads): they share
// the process's CUDA contexts, so a stream one holds makes the other's cudaFree wait, and a copy
// into pageable memory on it makes the other's cudaMalloc wait (perf/RESULTS.md, "First GPU
// runs"). One rank's first calls of a shape allocate while another's later ones hold: a cycle.
bool another_rank_in_this_process(Communicator& engine) {
  const ProcessIdentity mine = this_process();
  for (int r = 0; r < engine.nranks(); ++r) {
    if (r == engine.rank()) continue;
    if (same_process(mine, engine.transport()->process(r))) return true;
  }
  return false;
}

}  // namespace

ncclResult_t DeviceStaging::create(Communicator* engine, std::unique_ptr<DeviceStaging>* out) {
  const int device = engine->cuda_device();
  if (device < 0) {
    return fail(ncclInvalidUsage,
                "rank %d: the communicator has no CUDA device (none was current at its creation), "
                "so it cannot take device buffers",
                engine->rank());
  }
  CurrentDevice current(device);
  if (current.result() != cudaSuccess) {
    return cuda_failure(current.result(), "cudaSetDevice for the communicator's device", device);
  }
  std::unique_ptr<DeviceStaging> staging(new DeviceStaging());
  staging->engine_ = engine;
  staging->device_ = device;
  staging->timeout_seconds_ = engine->transport()->timeout_seconds();
  staging->shares_process_ = another_rank_in_this_process(*engine);
  TERSE_CHECK(PinnedStaging::create(&staging->pinned_));
  TERSE_CHECK(StreamWaiter::create(device, staging->pinned_->flag(), staging->pinned_->probe_word(),
                                   &staging->waiter_));
  staging->proxy_ =
      std::make_unique<StreamProxy>(staging->pinned_->flag(), staging->timeout_seconds_);
  *out = std::move(staging);
  return ncclSuccess;
}

DeviceStaging::~DeviceStaging() {
  if (proxy_ != nullptr) {
    proxy_->stop(StreamProxy::StopMode::kAbandon);
    proxy_->join();
    proxy_.reset();
  }
  CurrentDevice current(device_);
  backend_.reset();  // after the proxy: nothing runs on it any more
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
  if (pinned_ != nullptr) pinned_->free_when_idle(Deadline::after_seconds(timeout_seconds_));
}

void DeviceStaging::finish() {
  proxy_->stop(StreamProxy::StopMode::kFinish, Deadline::after_seconds(timeout_seconds_));
  proxy_->join();
}

ncclResult_t DeviceStaging::refuse_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t error = cudaStreamIsCapturing(stream, &capture);
  if (error != cudaSuccess) return cuda_failure(error, "cudaStreamIsCapturing", device_);
  if (capture != cudaStreamCaptureStatusNone) {
    return fail(ncclInvalidUsage,
                "stream %p is capturing a CUDA graph: terse runs device-buffer collectives through "
                "host-side work (its stream proxy) that a graph cannot replay",
                static_cast<void*>(stream));
  }
  return ncclSuccess;
}

#else  // !TERSE_HAVE_CUDA

ncclResult_t DeviceStaging::create(Communicator* engine, std::unique_ptr<DeviceStaging>*) {
  return fail(ncclInvalidUsage,
              "rank %d: terse was built without CUDA (TERSE_CUDA=OFF), so it cannot take "
              "device buffers",
              engine->rank());
}

DeviceStaging::~DeviceStaging() = default;

void DeviceStaging::finish() {}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
