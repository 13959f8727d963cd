#include "collectives/compressed/cuda_backend.h"

#include "codecs/device_support.h"
#include "collectives/compressed/contribution.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#include <algorithm>
#endif

namespace terse {

#if TERSE_HAVE_CUDA

namespace {

cudaStream_t cuda(void* stream) {
  return static_cast<cudaStream_t>(stream);
}
cudaEvent_t event(void* handle) {
  return static_cast<cudaEvent_t>(handle);
}

ncclResult_t cuda_failure(cudaError_t error, const char* what) {
  return cuda_call_failed(error, ("device backend: " + std::string(what) + " failed").c_str());
}

void count_copy(const CompressedContext& context, size_t bytes, bool to_host) {
  if (context.counters == nullptr) return;
  (to_host ? context.counters->pcie_bytes_to_host : context.counters->pcie_bytes_to_device) +=
      bytes;
}

}  // namespace

ncclResult_t CudaBackend::create(void* stream, std::unique_ptr<DeviceCompute> compute,
                                 std::unique_ptr<CudaBackend>* out) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  backend->stream_ = stream;
  backend->compute_ = std::move(compute);
  TERSE_CHECK(backend->compute_->load_kernels());
  for (void** handle : {&backend->messages_copied_, &backend->finished_}) {
    cudaEvent_t created = nullptr;
    const cudaError_t error = cudaEventCreateWithFlags(&created, cudaEventDisableTiming);
    if (error != cudaSuccess) return cuda_failure(error, "cudaEventCreateWithFlags");
    *handle = created;
  }
  *out = std::move(backend);
  return ncclSuccess;
}

CudaBackend::~CudaBackend() {
  for (void* handle : {messages_copied_, finished_}) {
    if (handle != nullptr) cudaEventDestroy(event(handle));
  }
  for (Slot& slot : device_) retired_device_.push_back(slot);
  retired_device_.push_back(encoded_);
  retired_device_.push_back(received_);
  retired_device_.push_back(loaded_);
  for (Slot& slot : pinned_) retired_pinned_.push_back(slot);
  // cudaFree and cudaFreeHost wait for every stream: not while one is held.
  for (const Slot& slot : retired_device_) {
    if (slot.data != nullptr) release_when_allowed([data = slot.data] { cudaFree(data); });
  }
  for (const Slot& slot : retired_pinned_) {
    if (slot.data != nullptr) release_when_allowed([data = slot.data] { cudaFreeHost(data); });
  }
}

void* CudaBackend::grow(Slot* slot, size_t bytes, bool device) {
  if (slot->bytes >= bytes && slot->data != nullptr) return slot->data;
  void* data = nullptr;
  const size_t size = bytes == 0 ? 1 : bytes;
  if (require_allocation_allowed(device ? "device backend scratch" : "device backend messages",
                                 size) != ncclSuccess) {
    return nullptr;
  }
  const cudaError_t error =
      device ? cudaMalloc(&data, size) : cudaHostAlloc(&data, size, cudaHostAllocDefault);
  if (error != cudaSuccess) {
    cuda_failure(error, device ? "cudaMalloc of scratch" : "cudaHostAlloc of message buffers");
    return nullptr;
  }
  if (slot->data != nullptr) (device ? retired_device_ : retired_pinned_).push_back(*slot);
  *slot = Slot{data, size};
  return data;
}

float* CudaBackend::floats(const CompressedContext&, ScratchSlot slot, size_t count) {
  return static_cast<float*>(
      grow(&device_[static_cast<int>(slot)], count * sizeof(float), /*device=*/true));
}

uint8_t* CudaBackend::message_buffer(const CompressedContext&, ScratchSlot slot, size_t bytes) {
  return static_cast<uint8_t*>(grow(&pinned_[static_cast<int>(slot)], bytes, /*device=*/false));
}

ncclResult_t CudaBackend::check_residual_memory(const CompressedArgs& args) const {
  if (args.entry != nullptr && args.entry->residual() != nullptr &&
      args.entry->memory() != Memory::kDevice) {
    return fail(ncclInvalidUsage,
                "device backend: the residual of %s is host memory, the call's buffers device "
                "memory",
                args.entry->key().describe().c_str());
  }
  return ncclSuccess;
}

ncclResult_t CudaBackend::encode_to_host(const CompressedArgs& args,
                                         const CompressedContext& context, const void* input,
                                         size_t count, DType dtype, const EncodeContext& encode,
                                         uint8_t* message, size_t capacity, size_t* message_bytes) {
  void* device_message = grow(&encoded_, capacity, /*device=*/true);
  if (device_message == nullptr) return ncclUnhandledCudaError;
  EncodeContext on_device = encode;
  on_device.memory = Memory::kDevice;
  on_device.stream = stream_;
  note_work("encode", args.codec, count);
  TERSE_CHECK(compute_->encode(*args.codec, input, count, dtype, on_device, device_message,
                               capacity, message_bytes));
  return copy_message_to_host(context, device_message, message, *message_bytes);
}

ncclResult_t CudaBackend::encode_compensated_to_host(const CompressedArgs& args,
                                                     const CompressedContext& context,
                                                     const void* input, float* residual,
                                                     size_t count, const EncodeContext& encode,
                                                     uint8_t* message, size_t capacity,
                                                     size_t* message_bytes) {
  void* device_message = grow(&encoded_, capacity, /*device=*/true);
  if (device_message == nullptr) return ncclUnhandledCudaError;
  EncodeContext on_device = encode;
  on_device.memory = Memory::kDevice;
  on_device.stream = stream_;
  note_work("encode", args.codec, count);
  TERSE_CHECK(compute_->encode_compensated(*args.codec, args.dtype, input, residual, count,
                                           on_device, device_message, capacity, message_bytes));
  return copy_message_to_host(context, device_message, message, *message_bytes);
}

ncclResult_t CudaBackend::copy_message_to_host(const CompressedContext& context,
                                               const void* device_message, uint8_t* message,
                                               size_t message_bytes) {
  cudaError_t error = cudaMemcpyAsync(message, device_message, message_bytes,
                                      cudaMemcpyDeviceToHost, cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaMemcpyAsync of a message to the host");
  count_copy(context, message_bytes, /*to_host=*/true);
  error = cudaEventRecord(event(messages_copied_), cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaEventRecord");
  return ncclSuccess;
}

ncclResult_t CudaBackend::encode_contribution(const CompressedArgs& args,
                                              const CompressedContext& context, float* values,
                                              const ElementRange& range, uint8_t* message,
                                              size_t capacity, size_t* message_bytes) {
  TERSE_CHECK(check_residual_memory(args));
  // As contribution.h's make_contribution_range + encode_contribution, on the device: the same
  // values, seed, error output and state, so the message is the host path's (bit for bit where
  // the codec's kernels match its CPU code).
  float* residual = call_residual(args);
  const void* send = static_cast<const uint8_t*>(args.send) + range.offset * dtype_size(args.dtype);
  EncodeContext encode = args.encode;
  encode.seed = range_seed(args.encode.seed, range.offset);
  encode.error = residual != nullptr ? residual + range.offset : nullptr;
  encode.state = nullptr;
  if (args.entry != nullptr && range.offset == 0 && range.count == args.count) {
    encode.state = args.entry->state();
  }
  if (residual != nullptr && compute_->fuses_compensation(*args.codec)) {
    // One pass over send and the residual; `values` stays untouched (docs/design.md section 3).
    return encode_compensated_to_host(args, context, send, residual + range.offset, range.count,
                                      encode, message, capacity, message_bytes);
  }
  TERSE_CHECK(compute_->compensate(args.dtype, send,
                                   residual != nullptr ? residual + range.offset : nullptr,
                                   values + range.offset, range.count, stream_));
  return encode_to_host(args, context, values + range.offset, range.count, DType::kFloat32, encode,
                        message, capacity, message_bytes);
}

bool CudaBackend::fuses_contribution(const CompressedArgs& args) const {
  return call_residual(args) != nullptr && compute_->fuses_compensation(*args.codec);
}

ncclResult_t CudaBackend::make_contribution(const CompressedArgs& args, const CompressedContext&,
                                            float* values, const ElementRange& range) {
  TERSE_CHECK(check_residual_memory(args));
  const float* residual = call_residual(args);
  const void* send = static_cast<const uint8_t*>(args.send) + range.offset * dtype_size(args.dtype);
  return compute_->compensate(args.dtype, send,
                              residual != nullptr ? residual + range.offset : nullptr,
                              values + range.offset, range.count, stream_);
}

ncclResult_t CudaBackend::encode_partial(const CompressedArgs& args,
                                         const CompressedContext& context, const float* values,
                                         const ElementRange& range, float* error, uint8_t* message,
                                         size_t capacity, size_t* message_bytes) {
  TERSE_CHECK(check_residual_memory(args));
  EncodeContext encode = args.encode;
  encode.seed = range_seed(args.encode.seed, range.offset);
  encode.error = error;
  encode.state = nullptr;
  return encode_to_host(args, context, values, range.count, DType::kFloat32, encode, message,
                        capacity, message_bytes);
}

ncclResult_t CudaBackend::wait_messages() {
  const cudaError_t error = cudaEventSynchronize(event(messages_copied_));
  if (error != cudaSuccess) return failed_wait(error, "waiting for messages copied to the host");
  return ncclSuccess;
}

bool CudaBackend::messages_ready() const {
  return cudaEventQuery(event(messages_copied_)) == cudaSuccess;
}

ncclResult_t CudaBackend::decode(const CompressedArgs& args, const CompressedContext& context,
                                 const uint8_t* message, size_t message_bytes, float* output,
                                 size_t count, bool accumulate) {
  TERSE_CHECK(check_residual_memory(args));
  // Room for the largest message of the whole tensor: a later one escaping NaN or Inf (one
  // overflowing step) is longer, and its plan may send larger pieces; it may arrive while the
  // caller's stream is held, when nothing can be allocated.
  const size_t room = std::max(message_bytes, message_capacity(args, args.count));
  void* device_message = grow(&received_, room, /*device=*/true);
  if (device_message == nullptr) return ncclUnhandledCudaError;
  // Enqueued before the codec validates the host bytes: a refused message leaves only a copy
  // into this scratch behind, never a write to `output`.
  const cudaError_t error = cudaMemcpyAsync(device_message, message, message_bytes,
                                            cudaMemcpyHostToDevice, cuda(stream_));
  if (error != cudaSuccess)
    return cuda_failure(error, "cudaMemcpyAsync of a message to the device");
  count_copy(context, message_bytes, /*to_host=*/false);
  note_work("decode", args.codec, count);
  return compute_->decode(*args.codec, device_message, message, message_bytes, output, count,
                          DType::kFloat32, accumulate, stream_);
}

ncclResult_t CudaBackend::copy_bytes_from_host(const CompressedContext& context, void* values,
                                               const uint8_t* host, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  const cudaError_t error =
      cudaMemcpyAsync(values, host, bytes, cudaMemcpyHostToDevice, cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaMemcpyAsync to the device");
  count_copy(context, bytes, /*to_host=*/false);
  return ncclSuccess;
}

ncclResult_t CudaBackend::copy_bytes_to_host(const CompressedContext& context, uint8_t* host,
                                             const void* values, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  cudaError_t error = cudaMemcpyAsync(host, values, bytes, cudaMemcpyDeviceToHost, cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaMemcpyAsync to the host");
  count_copy(context, bytes, /*to_host=*/true);
  error = cudaEventRecord(event(messages_copied_), cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaEventRecord");
  return ncclSuccess;
}

ncclResult_t CudaBackend::load(DType type, const void* input, float* values, size_t count,
                               bool accumulate) {
  if (accumulate) return compute_->add(type, input, values, count, stream_);
  return compute_->compensate(type, input, nullptr, values, count, stream_);
}

ncclResult_t CudaBackend::load_from_host(const CompressedContext& context, DType type,
                                         const uint8_t* host_input, float* values, size_t count,
                                         bool accumulate) {
  const size_t bytes = count * dtype_size(type);
  // One scratch for every load: the stream runs each copy after the load before it has read it.
  void* device_input = grow(&loaded_, bytes, /*device=*/true);
  if (device_input == nullptr) return ncclUnhandledCudaError;
  TERSE_CHECK(copy_bytes_from_host(context, device_input, host_input, bytes));
  return load(type, device_input, values, count, accumulate);
}

ncclResult_t CudaBackend::clear(float* values, size_t count) {
  const cudaError_t error = cudaMemsetAsync(values, 0, count * sizeof(float), cuda(stream_));
  if (error != cudaSuccess) return cuda_failure(error, "cudaMemsetAsync");
  return ncclSuccess;
}

ncclResult_t CudaBackend::low_rank(const LowRankStep& step) {
  note_work("PowerSGD step", nullptr, step.rows * step.cols);
  return compute_->low_rank(step, stream_);
}

ncclResult_t CudaBackend::add(float* sum, const float* addend, size_t count) {
  return compute_->add(DType::kFloat32, addend, sum, count, stream_);
}

ncclResult_t CudaBackend::write_result(const CompressedArgs& args, const float* sum,
                                       const ElementRange& range) {
  void* out = static_cast<uint8_t*>(args.recv) + range.offset * dtype_size(args.dtype);
  // Built in place (result_floats): already the result.
  if (out == sum && args.dtype == DType::kFloat32 && args.result_scale == 1.0) return ncclSuccess;
  return compute_->store(sum, static_cast<float>(args.result_scale), args.dtype, out, range.count,
                         stream_);
}

ncclResult_t CudaBackend::finish() {
  cudaError_t error = cudaEventRecord(event(finished_), cuda(stream_));
  if (error == cudaSuccess) error = cudaEventSynchronize(event(finished_));
  if (error != cudaSuccess) return failed_wait(error, "waiting for the device work");
  enqueued_.clear();  // everything enqueued has run
  return ncclSuccess;
}

void CudaBackend::note_work(const char* what, const Codec* codec, size_t count) {
  constexpr size_t kKept = 4;
  if (enqueued_.size() == kKept) enqueued_.erase(enqueued_.begin());
  std::string text = codec != nullptr ? codec->spec() + " " + what : what;
  enqueued_.push_back(text + " of " + std::to_string(count) + " elements");
}

ncclResult_t CudaBackend::failed_wait(int error, const char* what) {
  std::string work;
  for (const std::string& item : enqueued_) work += (work.empty() ? "" : ", ") + item;
  cudaGetLastError();  // terse's own failure, not the application's (cuda_call_failed)
  return fail(ncclUnhandledCudaError,
              "device backend: %s failed: %s (a kernel fault shows at the next wait; the stream's "
              "latest kernels: %s)",
              what, cudaGetErrorString(static_cast<cudaError_t>(error)),
              work.empty() ? "none" : work.c_str());
}

#else  // !TERSE_HAVE_CUDA

// Nothing else is defined: without CUDA no backend is ever made.
ncclResult_t CudaBackend::create(void*, std::unique_ptr<DeviceCompute>,
                                 std::unique_ptr<CudaBackend>*) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device backend");
}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
