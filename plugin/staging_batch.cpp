// A batch of calls through pinned staging, in its two steps: the input copies, the join of its
// streams and the host function that marks it ready (stage_inputs); then each stream's wait for
// the proxy, its output copies and the host function that returns the staging (stage_outputs).
#include "plugin/device_staging.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "collectives/communicator.h"
#include "collectives/reduction.h"
#include "common/result.h"
#include "plugin/buffer_placement.h"
#include "plugin/device_staging_internal.h"
#include "plugin/reduction_ops.h"
#include "plugin/stream_wait.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

constexpr size_t kNoScalar = SIZE_MAX;

struct DeviceStaging::Batch {
  std::vector<QueuedCall> calls;
  std::vector<CollectiveArgs> staged;  // what the engine runs: staging pointers for device calls
  std::vector<StagingLayout> layouts;  // per call (empty for host calls)
  std::vector<size_t> bases;           // per call, its offset in the block
  std::vector<size_t> scalars;         // per call, its staged scalar's offset, or kNoScalar
  std::vector<cudaStream_t> streams;   // distinct, in order of first use
  bool has_device_calls = false;
  std::shared_ptr<PinnedStaging> pinned;
  PinnedStaging::Block block;
  std::shared_ptr<StreamProxy::Unit> unit;
  uint32_t sequence = 0;
  Communicator* engine = nullptr;  // alive while its caller waits for the batch
  std::atomic<size_t> streams_left{0};
  // Set before the unit is marked ready (the proxy reads them after).
  bool cancelled = false;
  ncclResult_t cancel_result = ncclSuccess;
  std::string cancel_message;
};

bool DeviceStaging::has_device_calls(const Batch& batch) {
  return batch.has_device_calls;
}

ncclResult_t DeviceStaging::wait(const std::shared_ptr<Batch>& batch) {
  const ncclResult_t result = StreamProxy::wait(batch->unit);
  // A call given up on before it ran leaves this rank one operation behind its peers.
  if (StreamProxy::cancelled(batch->unit)) batch->engine->break_with(result);
  return result;
}

#if TERSE_HAVE_CUDA

// Host functions: CUDA runs them on one driver thread for the whole process, so they only mark
// state and wake the proxy; they neither block nor call CUDA. Each owns its ticket.
void CUDART_CB inputs_staged(void* ticket) {
  std::unique_ptr<std::shared_ptr<StreamProxy::Unit>> unit(
      static_cast<std::shared_ptr<StreamProxy::Unit>*>(ticket));
  StreamProxy::mark_ready(*unit);
}

namespace {

void CUDART_CB outputs_copied(void* ticket) {
  std::unique_ptr<std::shared_ptr<DeviceStaging::Batch>> batch(
      static_cast<std::shared_ptr<DeviceStaging::Batch>*>(ticket));
  if ((*batch)->streams_left.fetch_sub(1) == 1) (*batch)->pinned->release((*batch)->block);
}

// The engine's pointer for one of a device call's buffers: its place in the staging, or for a
// buffer this rank does not use, the other buffer's place when the user passed the same
// address (so the engine still sees an in-place call), else null (the engine ignores it).
void* staged_pointer(const void* mine, size_t my_bytes, size_t my_offset, const void* other,
                     size_t other_bytes, size_t other_offset, uint8_t* base) {
  if (my_bytes > 0) return base + my_offset;
  if (mine == other && other_bytes > 0) return base + other_offset;
  return nullptr;
}

}  // namespace

ncclResult_t DeviceStaging::join_event(size_t index, cudaEvent_t* event) {
  while (events_.size() <= index) {
    cudaEvent_t created = nullptr;
    const cudaError_t error = cudaEventCreateWithFlags(&created, cudaEventDisableTiming);
    if (error != cudaSuccess) return cuda_failure(error, "cudaEventCreateWithFlags", device_);
    events_.push_back(created);
  }
  *event = events_[index];
  return ncclSuccess;
}

ncclResult_t DeviceStaging::cancel(Batch& batch, ncclResult_t result) {
  batch.cancelled = true;
  batch.cancel_result = result;
  batch.cancel_message = last_error();
  // Copies into the block may already be enqueued: it must never be reused.
  pinned_->leak(batch.block);
  StreamProxy::mark_ready(batch.unit);
  return result;
}

ncclResult_t DeviceStaging::stage_inputs(std::vector<QueuedCall> calls,
                                         std::shared_ptr<Batch>* out) {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  auto batch = std::make_shared<Batch>();
  batch->engine = engine_;
  batch->calls = std::move(calls);
  batch->pinned = pinned_;
  size_t total = 0;
  for (const QueuedCall& call : batch->calls) {
    StagingLayout layout;
    if (call.on_device) {
      batch->has_device_calls = true;
      const BufferBytes bytes = buffer_bytes(call.args, engine_->rank(), engine_->nranks());
      layout = plan_staging(reinterpret_cast<uintptr_t>(call.args.send), bytes.send,
                            reinterpret_cast<uintptr_t>(call.args.recv), bytes.recv);
      if (std::find(batch->streams.begin(), batch->streams.end(), call.stream) ==
          batch->streams.end()) {
        batch->streams.push_back(call.stream);
      }
    }
    batch->bases.push_back(total);
    batch->layouts.push_back(layout);
    total += layout.bytes;
    const bool scalar = call.on_device && call.device_scalar != nullptr;
    batch->scalars.push_back(scalar ? total : kNoScalar);
    if (scalar) total += kStagingAlignment;  // one element of any type
  }

  // Host calls alone touch no CUDA (count-0 calls among them).
  std::optional<CurrentDevice> current;
  if (batch->has_device_calls) {
    current.emplace(device_);
    if (current->result() != cudaSuccess) {
      return cuda_failure(current->result(), "cudaSetDevice for the communicator's device",
                          device_);
    }
  }
  for (cudaStream_t stream : batch->streams) TERSE_CHECK(refuse_capture(stream));
  if (batch->has_device_calls) {
    const ncclResult_t acquired = pinned_->acquire(total, &batch->block);
    if (acquired != ncclSuccess) {
      engine_->break_with(acquired);  // the other ranks will wait for this rank in vain
      return acquired;
    }
  }

  batch->staged.reserve(batch->calls.size());
  for (size_t i = 0; i < batch->calls.size(); ++i) {
    const QueuedCall& call = batch->calls[i];
    CollectiveArgs staged = call.args;
    if (call.on_device) {
      const BufferBytes bytes = buffer_bytes(call.args, engine_->rank(), engine_->nranks());
      const StagingLayout& layout = batch->layouts[i];
      uint8_t* base = batch->block.data + batch->bases[i];
      staged.send = staged_pointer(call.args.send, bytes.send, layout.send_offset, call.args.recv,
                                   bytes.recv, layout.recv_offset, base);
      staged.recv = staged_pointer(call.args.recv, bytes.recv, layout.recv_offset, call.args.send,
                                   bytes.send, layout.send_offset, base);
    }
    batch->staged.push_back(staged);
  }

  // The work holds the batch (staging and all) until the proxy has run it and drops the work;
  // the cycle batch -> unit -> work -> batch ends there.
  Communicator* engine = engine_;
  auto work = [engine, batch]() -> ncclResult_t {
    ncclResult_t result = ncclSuccess;
    // The staged PreMulSum scalars have arrived with the inputs.
    for (size_t i = 0; i < batch->staged.size(); ++i) {
      if (batch->scalars[i] == kNoScalar || batch->cancelled) continue;
      CollectiveArgs& staged = batch->staged[i];
      staged.op.input_scale =
          premul_scalar_value(staged.type, batch->block.data + batch->scalars[i]);
    }
    if (batch->cancelled) {
      result = fail(batch->cancel_result, "%s", batch->cancel_message.c_str());
    } else if (batch->staged.size() == 1) {
      result = engine->run(batch->staged.front());
    } else {
      result = engine->run_batch(batch->staged);
    }
    // Host calls return their error; a device call already returned success to its caller,
    // so its failure must reach ncclCommGetAsyncError and every later call.
    if (result != ncclSuccess && batch->has_device_calls) engine->break_with(result);
    return result;
  };
  const ncclResult_t queued =
      proxy_->enqueue(work, !batch->has_device_calls, &batch->unit, &batch->sequence);
  if (queued != ncclSuccess) {
    if (batch->has_device_calls) pinned_->release(batch->block);
    return queued;
  }
  if (!batch->has_device_calls) {
    *out = std::move(batch);
    return ncclSuccess;
  }

  for (size_t i = 0; i < batch->calls.size(); ++i) {
    const StagingCopy& input = batch->layouts[i].input;
    if (!batch->calls[i].on_device || input.bytes == 0) continue;
    const cudaError_t error =
        cudaMemcpyAsync(batch->block.data + batch->bases[i] + input.staging_offset,
                        reinterpret_cast<const void*>(input.device), input.bytes, cudaMemcpyDefault,
                        batch->calls[i].stream);
    if (error != cudaSuccess) {
      return cancel(*batch, cuda_failure(error, "cudaMemcpyAsync of an input to staging", device_));
    }
  }
  for (size_t i = 0; i < batch->calls.size(); ++i) {
    if (batch->scalars[i] == kNoScalar) continue;
    const QueuedCall& call = batch->calls[i];
    const cudaError_t error =
        cudaMemcpyAsync(batch->block.data + batch->scalars[i], call.device_scalar,
                        nccl_type_size(call.args.type), cudaMemcpyDefault, call.stream);
    if (error != cudaSuccess) {
      return cancel(*batch, cuda_failure(error, "cudaMemcpyAsync of a PreMulSum scalar", device_));
    }
  }
  uint64_t staged_in = 0;
  for (size_t i = 0; i < batch->calls.size(); ++i) {
    if (batch->calls[i].on_device) staged_in += batch->layouts[i].input.bytes;
  }
  engine_->compression()->count_staging_copies(staged_in, 0);
  cudaStream_t first = batch->streams.front();
  for (size_t j = 1; j < batch->streams.size(); ++j) {
    cudaEvent_t event = nullptr;
    const ncclResult_t created = join_event(j - 1, &event);
    if (created != ncclSuccess) return cancel(*batch, created);
    cudaError_t error = cudaEventRecord(event, batch->streams[j]);
    if (error == cudaSuccess) error = cudaStreamWaitEvent(first, event, 0);
    if (error != cudaSuccess) {
      return cancel(*batch, cuda_failure(error, "joining the group's streams", device_));
    }
  }
  auto* ticket = new std::shared_ptr<StreamProxy::Unit>(batch->unit);
  const cudaError_t error = cudaLaunchHostFunc(first, inputs_staged, ticket);
  if (error != cudaSuccess) {
    delete ticket;
    return cancel(*batch, cuda_failure(error, "cudaLaunchHostFunc", device_));
  }
  *out = std::move(batch);
  return ncclSuccess;
}

ncclResult_t DeviceStaging::stage_outputs(const std::shared_ptr<Batch>& batch) {
  if (!batch->has_device_calls) return ncclSuccess;
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  CurrentDevice current(device_);
  batch->streams_left.store(batch->streams.size());
  ncclResult_t result = ncclSuccess;
  for (cudaStream_t stream : batch->streams) {
    result = waiter_->wait(stream, batch->sequence);
    for (size_t i = 0; result == ncclSuccess && i < batch->calls.size(); ++i) {
      const QueuedCall& call = batch->calls[i];
      const StagingCopy& output = batch->layouts[i].output;
      if (!call.on_device || call.stream != stream || output.bytes == 0) continue;
      const cudaError_t error =
          cudaMemcpyAsync(reinterpret_cast<void*>(output.device),
                          batch->block.data + batch->bases[i] + output.staging_offset, output.bytes,
                          cudaMemcpyDefault, stream);
      if (error != cudaSuccess) {
        result = cuda_failure(error, "cudaMemcpyAsync of an output from staging", device_);
      }
    }
    if (result == ncclSuccess) {
      uint64_t staged_out = 0;
      for (size_t i = 0; i < batch->calls.size(); ++i) {
        const QueuedCall& call = batch->calls[i];
        if (call.on_device && call.stream == stream) staged_out += batch->layouts[i].output.bytes;
      }
      engine_->compression()->count_staging_copies(0, staged_out);
      auto* ticket = new std::shared_ptr<Batch>(batch);
      const cudaError_t error = cudaLaunchHostFunc(stream, outputs_copied, ticket);
      if (error != cudaSuccess) {
        delete ticket;
        result = cuda_failure(error, "cudaLaunchHostFunc", device_);
      }
    }
    if (result != ncclSuccess) {
      // Some outputs will never arrive: the communicator is broken, and the block may still
      // receive copies, so it is never reused.
      engine_->break_with(result);
      pinned_->leak(batch->block);
      return result;
    }
  }
  return ncclSuccess;
}

#else  // !TERSE_HAVE_CUDA

ncclResult_t DeviceStaging::stage_inputs(std::vector<QueuedCall>, std::shared_ptr<Batch>*) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device staging");
}

ncclResult_t DeviceStaging::stage_outputs(const std::shared_ptr<Batch>&) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device staging");
}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
