// Device buffers for one communicator: calls whose buffers are device (or managed) memory run
// on the engine's host collectives through pinned staging memory, stream-ordered, and the
// calling thread never waits for the stream.
//
// For a batch (one call, or a communicator's calls in one ncclGroupEnd) on streams s1..sk:
//   1. on each stream: cudaMemcpyAsync device -> staging of the inputs of its calls;
//      streams 2..k record an event that s1 waits for (the join), then on s1 a host function
//      marks the batch ready on the communicator's stream proxy (stream_proxy.h);
//   2. on each stream: wait until the proxy publishes the batch's sequence (stream_wait.h),
//      cudaMemcpyAsync staging -> device of its outputs, then a host function that returns the
//      staging once the last stream is done (pinned_staging.h).
// The proxy thread runs the engine's host collective (Communicator::run, or run_batch for a
// group, as for host buffers) on the staging when the batch is ready, then publishes the
// sequence. A failure there still publishes it, so no stream hangs (the outputs are then
// garbage), and breaks the communicator: ncclCommGetAsyncError reports it and later calls fail.
//
// Host-buffer calls on a communicator that has staging go through the proxy too (queued ready,
// waited for), so its operations keep one order on every rank.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/collective_args.h"
#include "plugin/backend_route.h"
#include "plugin/pinned_staging.h"
#include "plugin/staging_layout.h"
#include "plugin/stream_proxy.h"

namespace terse {

class Communicator;
class StreamWaiter;

// One call as the API layer accepted it.
struct QueuedCall {
  CollectiveArgs args;  // the user's pointers
  // Device or managed buffers, staged; otherwise host buffers, which the engine uses directly.
  bool on_device = false;
  cudaStream_t stream = nullptr;  // on_device only
  // on_device only: the PreMulSum scalar (one element of args.type) in device memory, staged
  // with the inputs; args.op.input_scale is set from the staged copy when the call runs.
  const void* device_scalar = nullptr;
};

class DeviceStaging {
 public:
  // For `engine` (its CUDA device, rank, size and TERSE_TIMEOUT_S): the pinned flag, the
  // stream-wait method and the proxy thread. Fails where CUDA is not built.
  static ncclResult_t create(Communicator* engine, std::unique_ptr<DeviceStaging>* out);
  // Stops the proxy (abandoning what is queued, unless finish() ran), then frees the pinned
  // memory once no stream can touch it, waiting up to TERSE_TIMEOUT_S for streams to pass their
  // copies (leaking it after). Can block that long: ncclCommDestroy/Abort run it in the
  // background.
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  StreamProxy& proxy() { return *proxy_; }

  // ncclCommDestroy: every queued call still runs once its stream reaches it (until
  // TERSE_TIMEOUT_S), then the proxy ends.
  void finish();

  // A batch on its way through the two steps. Public only for the host functions.
  struct Batch;

  // Step 1: reserves staging, queues the engine call on the proxy and enqueues the input
  // copies, the join and the "ready" host function. A batch without device calls is queued
  // ready. The calls must have passed the engine's argument checks. A failure after the
  // batch was queued breaks the communicator (its peers are already waiting for it).
  ncclResult_t stage_inputs(std::vector<QueuedCall> calls, std::shared_ptr<Batch>* out);
  // Step 2: each stream waits for the proxy, copies its outputs back and returns the staging.
  // Apart from step 1 so that, when one thread drives several communicators on one stream,
  // every communicator's inputs are staged before any stream waits: their collectives need
  // each other.
  ncclResult_t stage_outputs(const std::shared_ptr<Batch>& batch);
  // Waits for the batch's engine call and returns its result (host-buffer calls in the batch
  // have then completed, as host calls must before ncclGroupEnd returns).
  static ncclResult_t wait(const std::shared_ptr<Batch>& batch);
  static bool has_device_calls(const Batch& batch);

  // A lone allreduce of device buffers on the device backend instead (backend_route.h): on
  // the stream, a host function that marks it ready and the wait for the proxy; no copies of
  // the tensor. Returns once those are enqueued. The proxy then runs the call while the stream
  // is held, so it must not allocate, free or load a kernel (common/stream_hold_gate.h): the
  // first call of each shape (BackendRoute::ran_before) runs without a hold instead, which
  // makes its memory and loads its kernels, and returns once it is done. So does every call of
  // a rank that shares its process with another rank of the communicator (ranks as threads):
  // one rank's allocations there would wait for another's held stream, which waits for them.
  ncclResult_t run_on_backend(const QueuedCall& call);

 private:
  DeviceStaging() = default;
  // run_on_backend's first call of a shape: waits for the stream's earlier work, runs the call
  // on the proxy in its turn and waits for it. Nothing is enqueued on the stream.
  ncclResult_t run_without_hold(const QueuedCall& call);
  ncclResult_t join_event(size_t index, cudaEvent_t* event);
  // Marks the batch failed and lets the proxy fail it (breaking the communicator and
  // publishing its sequence). Returns `result`.
  ncclResult_t cancel(Batch& batch, ncclResult_t result);
  // ncclInvalidUsage naming `stream` when it is capturing a CUDA graph.
  ncclResult_t refuse_capture(cudaStream_t stream);

  Communicator* engine_ = nullptr;
  int device_ = -1;
  double timeout_seconds_ = 0;
  bool shares_process_ = false;  // another rank of the communicator runs in this process
  std::shared_ptr<PinnedStaging> pinned_;
  std::unique_ptr<StreamWaiter> waiter_;
  std::unique_ptr<StreamProxy> proxy_;
  std::mutex enqueue_mutex_;         // one batch's enqueues at a time
  std::vector<cudaEvent_t> events_;  // the join's events, reused batch after batch
  // Made at the first call routed to the device backend; used by the proxy alone.
  std::unique_ptr<BackendRoute> backend_;
};

}  // namespace terse
