// Where a compressed allreduce's codec work runs, per memory kind (issue 12, docs/design.md section
// 3): HostBackend runs the CPU codecs on host buffers at once; CudaBackend (cuda_backend.h) runs
// the codecs' device path on a CUDA stream for device buffers. An algorithm written against this
// interface runs unchanged on either.
//
// The algorithm keeps the network: messages it sends and receives are always in host memory
// (message_buffer). The backend keeps the tensor-sized data (contribution, sums, residuals,
// result) in its own memory kind (floats), and moves only encoded messages between the two:
//   - encode_contribution / encode_partial write a message into a host buffer; on a device
//     backend that is a kernel, then a device-to-host copy of the message alone, so a message
//     may be sent only once wait_messages() has returned;
//   - decode validates the received bytes on the host (header and payload) and then decodes:
//     on a device backend, a host-to-device copy of the message and a kernel, asynchronously;
//   - finish() waits until every step enqueued has run (the host backend has nothing to wait
//     for): after it the result and the residuals are in place and the message buffers free.
// The uncompressed intra-node phases of the hierarchical and rail algorithms move the tensor
// itself between the ranks of a node, through host memory (the transport's): host_bytes gives
// the host memory a range of it travels through (the range itself on the host backend, pinned
// memory on a device backend), copy_bytes_to_host / copy_bytes_from_host move it there and back,
// and load / load_from_host widen it into fp32 sums in memory(). On a device backend those
// copies cross PCIe and are counted with the messages.
// The thread that runs the algorithm may wait (wait_messages, finish); device work itself is
// only ever enqueued, in call order, on one stream.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/compressed/compression_scratch.h"
#include "collectives/compressed/low_rank_step.h"
#include "collectives/ring_pattern.h"

namespace terse {

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;

  // The memory kind of the call's buffers, its residual entry and floats().
  virtual Memory memory() const = 0;

  // Scratch of `count` fp32 values in memory() (contents undefined; the slot grows only).
  virtual float* floats(const CompressedContext& context, ScratchSlot slot, size_t count) = 0;
  // Host memory for `bytes` bytes of messages (pinned on a device backend, so that copies of
  // messages are asynchronous). Slots are the algorithm's: kOutgoing, kIncoming, kSecondary.
  virtual uint8_t* message_buffer(const CompressedContext& context, ScratchSlot slot,
                                  size_t bytes) = 0;

  // This rank's contribution of `range` (send + residual, the residual receiving the encode's
  // error; contribution.h: make_contribution_range + encode_contribution) encoded into
  // `message` (host, `capacity` bytes). `values` is floats(kValues, args.count): where the
  // contribution is built. *message_bytes is known at once; the bytes are there after
  // wait_messages().
  virtual ncclResult_t encode_contribution(const CompressedArgs& args,
                                           const CompressedContext& context, float* values,
                                           const ElementRange& range, uint8_t* message,
                                           size_t capacity, size_t* message_bytes) = 0;
  // Whether encode_contribution of this call runs fused (the codec compensates inside its
  // encode, on this backend's memory): it then never touches `values`, which may be null.
  virtual bool fuses_contribution(const CompressedArgs& args) const = 0;
  // values[range] = send[range] (as fp32) + the residual's range, nothing encoded
  // (contribution.h's make_contribution_range): for an algorithm that adds this rank's
  // contribution to partial sums it then encodes itself (a ring hop, a tree's inner rank, a
  // recursive-doubling fold host). Must run before anything writes that residual range.
  virtual ncclResult_t make_contribution(const CompressedArgs& args,
                                         const CompressedContext& context, float* values,
                                         const ElementRange& range) = 0;
  // A partial sum `values` (range.count floats in memory()) encoded into `message` (host), the
  // error into `error` (memory(), may be null): contribution.h's encode_partial.
  virtual ncclResult_t encode_partial(const CompressedArgs& args, const CompressedContext& context,
                                      const float* values, const ElementRange& range, float* error,
                                      uint8_t* message, size_t capacity, size_t* message_bytes) = 0;
  // Returns once every message encoded so far is in its host buffer.
  virtual ncclResult_t wait_messages() = 0;

  // Decodes `message` (host, `message_bytes` as received) into `count` fp32 values at `output`
  // (memory()), adding when `accumulate`. The message is validated on the host before anything
  // is enqueued: a bad one fails here, and output is untouched. The host buffer must stay as it
  // is until finish().
  virtual ncclResult_t decode(const CompressedArgs& args, const CompressedContext& context,
                              const uint8_t* message, size_t message_bytes, float* output,
                              size_t count, bool accumulate) = 0;

  // values[0 .. bytes) = host[0 .. bytes) (values in memory(), host in host memory), counted as
  // bytes to the device. Nothing to do on the host backend when the two are one buffer. host
  // must stay as it is until finish().
  virtual ncclResult_t copy_bytes_from_host(const CompressedContext& context, void* values,
                                            const uint8_t* host, size_t bytes) = 0;
  // host[0 .. bytes) = values[0 .. bytes) (values in memory(), host in host memory), counted as
  // bytes to the host. They are there after wait_messages(). Nothing to do on the host backend
  // when the two are one buffer.
  virtual ncclResult_t copy_bytes_to_host(const CompressedContext& context, uint8_t* host,
                                          const void* values, size_t bytes) = 0;
  // copy_bytes_from_host of `count` floats: a sum the algorithm made on the host (sparse
  // allgather's dense ring).
  ncclResult_t copy_from_host(const CompressedContext& context, float* values,
                              const float* host_values, size_t count) {
    return copy_bytes_from_host(context, values, reinterpret_cast<const uint8_t*>(host_values),
                                count * sizeof(float));
  }
  // copy_bytes_to_host of `count` floats: factors the algorithm sums on the host (PowerSGD's P
  // and Q).
  ncclResult_t copy_to_host(const CompressedContext& context, float* host_values,
                            const float* values, size_t count) {
    return copy_bytes_to_host(context, reinterpret_cast<uint8_t*>(host_values), values,
                              count * sizeof(float));
  }
  // Host memory through which `bytes` of `values` (memory()) travel to or from the network:
  // `values` itself on the host backend, where nothing needs copying, else the pinned message
  // buffer of `slot`.
  uint8_t* host_bytes(const CompressedContext& context, ScratchSlot slot, const void* values,
                      size_t bytes) {
    if (memory() == Memory::kHost) return static_cast<uint8_t*>(const_cast<void*>(values));
    return message_buffer(context, slot, bytes);
  }
  // values[i] = input[i] as fp32, or values[i] += it when `accumulate`, for i < count (input of
  // `type` and values both in memory()): a node's sum of its ranks' tensors.
  virtual ncclResult_t load(DType type, const void* input, float* values, size_t count,
                            bool accumulate) = 0;
  // The same from `host_input` in host memory (what another rank of the node sent), counted as
  // bytes to the device on a device backend. host_input must stay as it is until finish().
  virtual ncclResult_t load_from_host(const CompressedContext& context, DType type,
                                      const uint8_t* host_input, float* values, size_t count,
                                      bool accumulate) = 0;
  // values[0 .. count) = 0 (memory()).
  virtual ncclResult_t clear(float* values, size_t count) = 0;
  // One of PowerSGD's tensor-sized steps (low_rank_step.h) on memory().
  virtual ncclResult_t low_rank(const LowRankStep& step) = 0;
  // sum[i] += addend[i] for i < count (both memory()).
  virtual ncclResult_t add(float* sum, const float* addend, size_t count) = 0;
  // recv[range] = sum[0 .. range.count) * args.result_scale in args.dtype (contribution.h's
  // write_result; sum in memory()). Nothing is copied when sum is recv[range] itself, fp32 and
  // unscaled (result_floats).
  virtual ncclResult_t write_result(const CompressedArgs& args, const float* sum,
                                    const ElementRange& range) = 0;

  // Waits until everything enqueued has run. Call it before the call returns, also on failure.
  virtual ncclResult_t finish() = 0;

  // Where an algorithm may build its whole fp32 result (contribution.h's result_buffer, in
  // memory()): recv itself when the result is fp32 and unscaled (write_result then copies
  // nothing), else floats(slot). Only once send has been read for good (recv may be send).
  float* result_floats(const CompressedArgs& args, const CompressedContext& context,
                       ScratchSlot slot) {
    if (args.dtype == DType::kFloat32 && args.result_scale == 1.0) {
      return static_cast<float*>(args.recv);
    }
    return floats(context, slot, args.count);
  }
};

// The backend of the calls whose buffers are host memory: contribution.h's steps, at once.
ExecutionBackend& host_backend();

// The backend `context` names, or host_backend() when it names none.
inline ExecutionBackend& backend_of(const CompressedContext& context) {
  return context.backend != nullptr ? *context.backend : host_backend();
}

}  // namespace terse
