// An allreduce whose buffers are device memory, as the engine sees it (issue 12, docs/design.md
// section 3). The API layer (plugin/backend_route.h) makes one per call and hands it over in
// CollectiveArgs::device; the engine then decides, from the plan it makes for the call (the same
// on every rank, whatever memory the ranks' buffers are in), where the codec work runs:
//   - a compressed plan (every compressed algorithm is written against the execution backend):
//     on backend(), the buffers left where they are; only encoded messages cross PCIe, and what
//     the intra-node phases of a hierarchical or rail plan exchange (execution_backend.h);
//   - an uncompressed plan: the communicator copies the whole tensor to host memory (stage_in),
//     runs the dense algorithm there, and copies the result back (stage_out).
// Either way the messages on the wire are the same (the device kernels write the CPU codecs'
// wire format), so a rank with device buffers and one with host buffers run one algorithm.
#pragma once

#include <nccl.h>

namespace terse {

class ExecutionBackend;
struct CollectiveArgs;

class DeviceBuffers {
 public:
  virtual ~DeviceBuffers() = default;

  // The device backend for these buffers: its stream follows everything the caller enqueued
  // before the call.
  virtual ExecutionBackend* backend() = 0;
  // The stream of backend() (a cudaStream_t): where a new device residual is zeroed.
  virtual void* stream() = 0;
  // Copies the call's inputs (the whole tensor) into host memory and points args->send and
  // args->recv there; waits for the copies.
  virtual ncclResult_t stage_in(CollectiveArgs* args) = 0;
  // After stage_in and the host run: copies the result back into the device buffers and waits.
  virtual ncclResult_t stage_out() = 0;
};

}  // namespace terse
