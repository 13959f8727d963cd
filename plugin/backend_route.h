// The route of a lone allreduce of device buffers that the compression engine expects to run on
// the CUDA execution backend (collectives/compressed/cuda_backend.h): the tensor stays on the
// device and only encoded messages cross PCIe (issue 12, docs/design.md section 3).
//
// On the caller's stream (DeviceStaging::run_on_backend): a host function that marks the call
// ready on the communicator's stream proxy, then a wait until the proxy publishes the call's
// sequence (stream_wait.h), exactly as the staging path orders its copies; the caller returns
// at once. The proxy runs the call (run) once the host function ran, so everything the caller
// enqueued before it has completed: the backend's own stream needs no event from the caller's.
// The engine then plans the call as on every rank and either runs it on the backend (waiting
// on its events only, the result in place before the sequence is published) or, for a plan the
// backend cannot run (the prediction that chose this route was made before earlier calls had
// moved the tensor's step, or without agreed codec speeds), copies the whole tensor through
// pinned host memory on this route's stream (stage_in, stage_out: the staging path's work, done
// by the proxy). Either way the caller's later stream work waits for the published sequence.
//
// The kernels: the codecs' (make_cuda_compute). Without a GPU the tests link the plugin's objects
// with the same kernels built for the host (tests/host_kernels); libterse.so has no hook for it.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "collectives/collective_args.h"
#include "collectives/compressed/cuda_backend.h"
#include "collectives/device_buffers.h"
#include "plugin/pinned_staging.h"
#include "plugin/staging_layout.h"

namespace terse {

class Communicator;

class BackendRoute final : public DeviceBuffers {
 public:
  // For `engine`, whose device is `device` (current on the calling thread): a stream of its own
  // and the backend on it.
  static ncclResult_t create(Communicator* engine, int device,
                             std::shared_ptr<PinnedStaging> pinned,
                             std::unique_ptr<BackendRoute>* out);
  // Frees the backend and its stream; no call may be running.
  ~BackendRoute() override;
  BackendRoute(const BackendRoute&) = delete;
  BackendRoute& operator=(const BackendRoute&) = delete;

  // On the stream proxy, one call at a time: the engine's allreduce of `args` (device
  // buffers). Returns once the result is in args.recv.
  ncclResult_t run(const CollectiveArgs& args);

  // Whether a call like `args` (same buffers, count, type and operation) ran to the end before:
  // its residual, scratch and kernels then exist, and the call may hold its stream while it
  // runs (device_staging.h). Set by run() on success, cleared by a failure.
  bool ran_before(const CollectiveArgs& args) const;

  // Where a call's buffers would sit in pinned staging, were it staged (stage_in).
  StagingLayout staging_layout(const CollectiveArgs& args) const;

  ExecutionBackend* backend() override { return backend_.get(); }
  void* stream() override { return stream_; }
  ncclResult_t stage_in(CollectiveArgs* args) override;
  ncclResult_t stage_out() override;

 private:
  BackendRoute() = default;
  // Waits for the stream and gives the staging block back, if one is held.
  void release_block();

  struct CallShape {
    const void* send;
    const void* recv;
    size_t count;
    int type;
    int op;
    bool operator<(const CallShape& other) const;
  };
  static CallShape shape_of(const CollectiveArgs& args);

  Communicator* engine_ = nullptr;
  int device_ = -1;
  void* stream_ = nullptr;  // cudaStream_t
  // A CudaBackend, held by its interface: builds without CUDA define no CudaBackend destructor.
  std::unique_ptr<ExecutionBackend> backend_;
  std::shared_ptr<PinnedStaging> pinned_;
  // Shapes of the calls that ran to the end without allocating (ran_before). Written by the
  // proxy, read by the caller's thread.
  mutable std::mutex shapes_mutex_;
  std::set<CallShape> shapes_;
  // Residual entries dropped (reset, evicted, recreated) when shapes_ was last added to.
  uint64_t shapes_dropped_ = 0;
  // The policy generation (CompressionEngine::policy_generation) when shapes_ was last added to.
  uint64_t shapes_policy_ = 0;
  uint64_t dropped_residuals() const;
  // The call being staged (stage_in until stage_out).
  PinnedStaging::Block block_;
  StagingLayout layout_;
};

}  // namespace terse
