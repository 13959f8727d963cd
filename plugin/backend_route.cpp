#include "plugin/backend_route.h"

#include <cstdlib>
#include <utility>

#include "collectives/communicator.h"
#include "collectives/compressed/compression_engine.h"
#include "common/log.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"
#include "plugin/buffer_placement.h"
#include "plugin/cuda_failure.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

bool BackendRoute::CallShape::operator<(const CallShape& other) const {
  return std::tie(send, recv, count, type, op) <
         std::tie(other.send, other.recv, other.count, other.type, other.op);
}

BackendRoute::CallShape BackendRoute::shape_of(const CollectiveArgs& args) {
  return CallShape{args.send, args.recv, args.count, static_cast<int>(args.type),
                   static_cast<int>(args.op.kind)};
}

uint64_t BackendRoute::dropped_residuals() const {
  const ResidualStats stats = engine_->compression()->residual_stats();
  return stats.resets + stats.evictions + stats.recreations;
}

bool BackendRoute::ran_before(const CollectiveArgs& args) const {
  std::lock_guard<std::mutex> lock(shapes_mutex_);
  // A residual dropped since (terseCommResetResidual, an eviction, a tensor used at another size)
  // is made again by the next call that finds it missing: every shape is cold until run() says.
  // Nor one whose plan may have changed (a new policy or codec): its kernels may be new to the
  // device, and a kernel's first launch waits for the device, held stream included.
  return dropped_residuals() == shapes_dropped_ &&
         engine_->compression()->policy_generation() == shapes_policy_ &&
         shapes_.count(shape_of(args)) != 0;
}

StagingLayout BackendRoute::staging_layout(const CollectiveArgs& args) const {
  const BufferBytes bytes = buffer_bytes(args, engine_->rank(), engine_->nranks());
  return plan_staging(reinterpret_cast<uintptr_t>(args.send), bytes.send,
                      reinterpret_cast<uintptr_t>(args.recv), bytes.recv);
}

#if TERSE_HAVE_CUDA

namespace {

cudaStream_t cuda(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

}  // namespace

ncclResult_t BackendRoute::create(Communicator* engine, int device,
                                  std::shared_ptr<PinnedStaging> pinned,
                                  std::unique_ptr<BackendRoute>* out) {
  std::unique_ptr<BackendRoute> route(new BackendRoute());
  route->engine_ = engine;
  route->device_ = device;
  route->pinned_ = std::move(pinned);
  cudaStream_t stream = nullptr;
  const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error != cudaSuccess) return cuda_failure(error, "cudaStreamCreateWithFlags", device);
  route->stream_ = stream;
  std::unique_ptr<DeviceCompute> compute;
  TERSE_CHECK(make_cuda_compute(&compute));
  std::unique_ptr<CudaBackend> backend;
  TERSE_CHECK(CudaBackend::create(stream, std::move(compute), &backend));
  route->backend_ = std::move(backend);
  *out = std::move(route);
  return ncclSuccess;
}

BackendRoute::~BackendRoute() {
  backend_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(cuda(stream_));
}

ncclResult_t BackendRoute::run(const CollectiveArgs& args) {
  // The proxy's thread: the backend's stream and memory belong to the communicator's device.
  const cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess)
    return cuda_failure(error, "cudaSetDevice on the stream proxy", device_);
  CollectiveArgs call = args;
  call.device = this;
  const unsigned long long allocations = allocations_on_this_thread();
  const ncclResult_t result = engine_->run(call);
  release_block();  // a staged call that failed between stage_in and stage_out
  // Warm only once a call of the shape needed no new memory (a residual admitted late, a state
  // made at a later step would otherwise be made under a hold).
  const bool allocated = allocations_on_this_thread() != allocations;
  std::lock_guard<std::mutex> lock(shapes_mutex_);
  if (result == ncclSuccess && !allocated) {
    const uint64_t dropped = dropped_residuals();
    const uint64_t policy = engine_->compression()->policy_generation();
    if (dropped != shapes_dropped_ || policy != shapes_policy_) shapes_.clear();
    shapes_dropped_ = dropped;
    shapes_policy_ = policy;
    if (shapes_.insert(shape_of(args)).second) {
      TERSE_INFO(
          "device backend: allreduce of %zu elements at %p ran without allocating: its "
          "later calls hold the stream",
          args.count, args.recv);
    }
  } else {
    if (allocated) {
      TERSE_INFO(
          "device backend: allreduce of %zu elements at %p allocated (latest: %s): its "
          "next call runs without a hold too",
          args.count, args.recv, latest_allocation_on_this_thread());
    }
    shapes_.erase(shape_of(args));
  }
  return result;
}

ncclResult_t BackendRoute::stage_in(CollectiveArgs* args) {
  layout_ = staging_layout(*args);
  TERSE_CHECK(pinned_->acquire(layout_.bytes, &block_));
  args->send = block_.data + layout_.send_offset;
  args->recv = block_.data + layout_.recv_offset;
  const StagingCopy& input = layout_.input;
  if (input.bytes == 0) return ncclSuccess;
  cudaError_t error = cudaMemcpyAsync(block_.data + input.staging_offset,
                                      reinterpret_cast<const void*>(input.device), input.bytes,
                                      cudaMemcpyDefault, cuda(stream_));
  if (error == cudaSuccess) error = cudaStreamSynchronize(cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "staging an input to the host", device_);
  engine_->compression()->count_staging_copies(input.bytes, 0);
  return ncclSuccess;
}

ncclResult_t BackendRoute::stage_out() {
  const StagingCopy& output = layout_.output;
  if (output.bytes > 0) {
    cudaError_t error =
        cudaMemcpyAsync(reinterpret_cast<void*>(output.device), block_.data + output.staging_offset,
                        output.bytes, cudaMemcpyDefault, cuda(stream_));
    if (error == cudaSuccess) error = cudaStreamSynchronize(cuda(stream_));
    if (error != cudaSuccess) return cuda_failure(error, "copying a result to the device", device_);
    engine_->compression()->count_staging_copies(0, output.bytes);
  }
  release_block();
  return ncclSuccess;
}

void BackendRoute::release_block() {
  if (block_.data == nullptr) return;
  // A failed copy may still be in flight: the block goes back only once the stream is idle.
  if (cudaStreamSynchronize(cuda(stream_)) == cudaSuccess) {
    pinned_->release(block_);
  } else {
    cudaGetLastError();
    pinned_->leak(block_);
  }
  block_ = PinnedStaging::Block{};
}

#else  // !TERSE_HAVE_CUDA

ncclResult_t BackendRoute::create(Communicator*, int, std::shared_ptr<PinnedStaging>,
                                  std::unique_ptr<BackendRoute>*) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}
BackendRoute::~BackendRoute() = default;
ncclResult_t BackendRoute::run(const CollectiveArgs&) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}
ncclResult_t BackendRoute::stage_in(CollectiveArgs*) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}
ncclResult_t BackendRoute::stage_out() {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}
void BackendRoute::release_block() {}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
