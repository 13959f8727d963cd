// The device execution backend (execution_backend.h): a compressed allreduce of device buffers
// runs its codec work as kernels on one CUDA stream, and only encoded messages cross PCIe.
//
//   encode:  compensate (send + residual, device) -> codec encode kernel (device message, the
//            error into the device residual) -> cudaMemcpyAsync of the message alone into pinned
//            host memory -> event; wait_messages() waits for that event, so the algorithm never
//            sends a message before its copy has landed. Where the codec fuses compensation on
//            the device (int8/int4/int2: Codec::fuses_device_compensation) the first two are
//            one kernel reading send and the residual and writing the new residual.
//   decode:  the received bytes (pinned host) are validated on the host, then copied to the
//            device and decoded there (accumulating), asynchronously: nothing waits for the
//            stream until finish().
// Ordering with the caller: everything goes on `stream` in call order, so the work the caller
// enqueued on it before the collective runs first and what it enqueues after sees the result.
// A caller whose stream must not be blocked gives a stream of its own joined to its stream with
// events (and its stream waits for the collective's end the same way); the thread that runs the
// algorithm (the communicator's stream proxy) waits on events only.
//
// The hierarchical and rail algorithms' uncompressed intra-node phases copy the tensor's bytes
// that other ranks of the node send or receive (copy_bytes_to_host, copy_bytes_from_host,
// load_from_host): the transport moves host memory only, so those bytes cross PCIe too, and are
// counted with the messages.
//
// Scope: every codec. The casts and the blockwise quantizers, whose device encode knows its
// message size without waiting; the sparsifiers (Top-K, threshold, DGC, Random-K), whose device
// selection waits for the stream to learn how many elements it kept (sparse_select_kernels.h;
// Random-K's k is known at once), a wait of the algorithm's thread, which waits for the message
// before sending it anyway; PowerSGD's steps (low_rank), its factors crossing to the host and
// back (copy_to_host, copy_from_host) for their sums. Every decode validates the received bytes
// on the host (header, payload, a sparse message's indices) and only enqueues its kernels. A
// device encode carries no non-finite escapes (a NaN or Inf input is quantized or selected as
// the kernels do, not sent exactly as the host path does). Written and tested against a fake
// CUDA runtime (tests/compressed/device/), not yet on a GPU: the GPU tests there must pass
// before anything routes application calls here.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/compressed/device_compute.h"
#include "collectives/compressed/execution_backend.h"

namespace terse {

class CudaBackend final : public ExecutionBackend {
 public:
  // A backend whose device work goes on `stream` (a cudaStream_t of the current device) through
  // `compute` (make_cuda_compute(), or a test's). Fails where CUDA is not built (and nothing but
  // create() is defined there).
  static ncclResult_t create(void* stream, std::unique_ptr<DeviceCompute> compute,
                             std::unique_ptr<CudaBackend>* out);
  // Frees its device and pinned memory: call finish() first (frees never wait for the stream).
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Memory memory() const override { return Memory::kDevice; }
  float* floats(const CompressedContext& context, ScratchSlot slot, size_t count) override;
  uint8_t* message_buffer(const CompressedContext& context, ScratchSlot slot,
                          size_t bytes) override;
  ncclResult_t encode_contribution(const CompressedArgs& args, const CompressedContext& context,
                                   float* values, const ElementRange& range, uint8_t* message,
                                   size_t capacity, size_t* message_bytes) override;
  bool fuses_contribution(const CompressedArgs& args) const override;
  ncclResult_t make_contribution(const CompressedArgs& args, const CompressedContext& context,
                                 float* values, const ElementRange& range) override;
  ncclResult_t encode_partial(const CompressedArgs& args, const CompressedContext& context,
                              const float* values, const ElementRange& range, float* error,
                              uint8_t* message, size_t capacity, size_t* message_bytes) override;
  ncclResult_t wait_messages() override;
  ncclResult_t decode(const CompressedArgs& args, const CompressedContext& context,
                      const uint8_t* message, size_t message_bytes, float* output, size_t count,
                      bool accumulate) override;
  ncclResult_t copy_bytes_from_host(const CompressedContext& context, void* values,
                                    const uint8_t* host, size_t bytes) override;
  ncclResult_t copy_bytes_to_host(const CompressedContext& context, uint8_t* host,
                                  const void* values, size_t bytes) override;
  ncclResult_t load(DType type, const void* input, float* values, size_t count,
                    bool accumulate) override;
  ncclResult_t load_from_host(const CompressedContext& context, DType type,
                              const uint8_t* host_input, float* values, size_t count,
                              bool accumulate) override;
  ncclResult_t clear(float* values, size_t count) override;
  ncclResult_t low_rank(const LowRankStep& step) override;
  ncclResult_t add(float* sum, const float* addend, size_t count) override;
  ncclResult_t write_result(const CompressedArgs& args, const float* sum,
                            const ElementRange& range) override;
  ncclResult_t finish() override;

  // Whether every message encoded so far has reached its host buffer (never waits).
  bool messages_ready() const;

 private:
  // A buffer that only grows. A replaced one is kept until the backend goes (freeing device or
  // pinned memory waits for the whole device, which would deadlock ranks that share a GPU).
  struct Slot {
    void* data = nullptr;
    size_t bytes = 0;
  };

  CudaBackend() = default;
  // At least `bytes` in `slot`, device memory or pinned host memory; null (the error recorded)
  // when the allocation fails.
  void* grow(Slot* slot, size_t bytes, bool device);
  // Refuses a call whose residual is host memory (its entry was made for host buffers).
  ncclResult_t check_residual_memory(const CompressedArgs& args) const;
  // The encode of `count` values of `dtype` at `input` (device) into the device message, then
  // its copy into `message` (host) and the event that wait_messages waits for.
  ncclResult_t encode_to_host(const CompressedArgs& args, const CompressedContext& context,
                              const void* input, size_t count, DType dtype,
                              const EncodeContext& encode, uint8_t* message, size_t capacity,
                              size_t* message_bytes);
  // The fused encode of send (args.dtype) + residual, the residual receiving the error
  // (DeviceCompute::encode_compensated), then its copy as encode_to_host's.
  ncclResult_t encode_compensated_to_host(const CompressedArgs& args,
                                          const CompressedContext& context, const void* input,
                                          float* residual, size_t count,
                                          const EncodeContext& encode, uint8_t* message,
                                          size_t capacity, size_t* message_bytes);
  // The device message's copy into `message` (host), counted, and the event wait_messages
  // waits for.
  ncclResult_t copy_message_to_host(const CompressedContext& context, const void* device_message,
                                    uint8_t* message, size_t message_bytes);

  // The kernels' work enqueued since the stream's last completed wait, newest last (a few): a
  // kernel's fault shows only at the next wait, and CUDA does not say which kernel it was.
  void note_work(const char* what, const Codec* codec, size_t count);
  // ncclUnhandledCudaError for a wait that failed, naming that work.
  ncclResult_t failed_wait(int error, const char* what);

  void* stream_ = nullptr;
  std::vector<std::string> enqueued_;
  std::unique_ptr<DeviceCompute> compute_;
  void* messages_copied_ = nullptr;  // cudaEvent_t: after the last message's copy to the host
  void* finished_ = nullptr;         // cudaEvent_t: after the last work enqueued
  Slot device_[static_cast<int>(ScratchSlot::kCount)];
  Slot pinned_[static_cast<int>(ScratchSlot::kCount)];
  Slot encoded_;   // device: the message being encoded
  Slot received_;  // device: the message being decoded
  Slot loaded_;    // device: the tensor bytes load_from_host widens
  std::vector<Slot> retired_device_, retired_pinned_;
};

}  // namespace terse
