#include "emulated_compute.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstring>
#include <functional>

#include "codecs/dtype.h"
#include "common/result.h"

namespace terse {
namespace test {

// One emulated kernel: its device buffers (copied in when `in`, out when `out`), their host
// copies, and the CPU code over those.
struct EmulatedCompute::Job {
  struct Buffer {
    void* device;
    bool in;
    bool out;
    std::vector<uint8_t> host;
  };
  std::vector<Buffer> buffers;
  std::function<std::string(std::vector<Buffer>&)> run;
  EmulatedCompute* owner = nullptr;

  void add(const void* device, size_t bytes, bool in, bool out) {
    buffers.push_back(Buffer{const_cast<void*>(device), in, out, std::vector<uint8_t>(bytes)});
  }
};

namespace {

// Under the fake CUDA runtime, marks this thread's next copies as an emulated kernel's (the fake
// would otherwise make a copy into pageable memory wait for its stream, as CUDA does); with a
// real runtime there is no such switch.
void emulated_kernel_copies(bool on) {
  using Switch = void (*)(int);
  static const Switch fake_switch =
      reinterpret_cast<Switch>(dlsym(RTLD_DEFAULT, "fakeCudaEmulatedKernelCopies"));
  if (fake_switch != nullptr) fake_switch(on ? 1 : 0);
}

void CUDART_CB run_job(void* arg) {
  auto* job = static_cast<EmulatedCompute::Job*>(arg);
  const std::string failure = job->run(job->buffers);
  if (!failure.empty()) job->owner->record_failure(failure);
}

}  // namespace

void EmulatedCompute::record_failure(const std::string& failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_ += failure + "\n";
}

std::string EmulatedCompute::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

ncclResult_t EmulatedCompute::launch(const std::shared_ptr<Job>& job, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  job->owner = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
  }
  emulated_kernel_copies(true);
  for (Job::Buffer& buffer : job->buffers) {
    if (!buffer.in || buffer.host.empty()) continue;
    if (cudaMemcpyAsync(buffer.host.data(), buffer.device, buffer.host.size(),
                        cudaMemcpyDeviceToHost, s) != cudaSuccess) {
      emulated_kernel_copies(false);
      return fail(ncclUnhandledCudaError, "emulated kernel: copy in");
    }
  }
  emulated_kernel_copies(false);
  if (cudaLaunchHostFunc(s, run_job, job.get()) != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "emulated kernel: host function");
  }
  for (Job::Buffer& buffer : job->buffers) {
    if (!buffer.out || buffer.host.empty()) continue;
    if (cudaMemcpyAsync(buffer.device, buffer.host.data(), buffer.host.size(),
                        cudaMemcpyHostToDevice, s) != cudaSuccess) {
      return fail(ncclUnhandledCudaError, "emulated kernel: copy out");
    }
  }
  return ncclSuccess;
}

ncclResult_t EmulatedCompute::compensate(DType input_type, const void* input, const float* residual,
                                         float* values, size_t count, void* stream) {
  auto job = std::make_shared<Job>();
  job->add(input, count * dtype_size(input_type), true, false);
  job->add(residual, residual != nullptr ? count * sizeof(float) : 0, true, false);
  job->add(values, count * sizeof(float), false, true);
  const bool has_residual = residual != nullptr;
  job->run = [=](std::vector<Job::Buffer>& b) {
    const float* r = reinterpret_cast<const float*>(b[1].host.data());
    float* v = reinterpret_cast<float*>(b[2].host.data());
    for (size_t i = 0; i < count; ++i) {
      v[i] = has_residual ? load_element(b[0].host.data(), input_type, i) + r[i]
                          : load_element(b[0].host.data(), input_type, i);
    }
    return std::string();
  };
  return launch(job, stream);
}

ncclResult_t EmulatedCompute::add(DType addend_type, const void* addend, float* sum, size_t count,
                                  void* stream) {
  auto job = std::make_shared<Job>();
  job->add(sum, count * sizeof(float), true, true);
  job->add(addend, count * dtype_size(addend_type), true, false);
  job->run = [=](std::vector<Job::Buffer>& b) {
    float* s = reinterpret_cast<float*>(b[0].host.data());
    for (size_t i = 0; i < count; ++i) s[i] += load_element(b[1].host.data(), addend_type, i);
    return std::string();
  };
  return launch(job, stream);
}

ncclResult_t EmulatedCompute::store(const float* values, float scale, DType output_type,
                                    void* output, size_t count, void* stream) {
  auto job = std::make_shared<Job>();
  job->add(values, count * sizeof(float), true, false);
  job->add(output, count * dtype_size(output_type), false, true);
  job->run = [=](std::vector<Job::Buffer>& b) {
    const float* v = reinterpret_cast<const float*>(b[0].host.data());
    for (size_t i = 0; i < count; ++i)
      store_element(b[1].host.data(), output_type, i, v[i] * scale);
    return std::string();
  };
  return launch(job, stream);
}

ncclResult_t EmulatedCompute::encode(Codec& codec, const void* input, size_t count, DType dtype,
                                     const EncodeContext& context, void* message, size_t capacity,
                                     size_t* message_bytes) {
  if (codec.family() == CodecFamily::kSparse) {
    return encode_sparse(codec, input, count, dtype, context, message, capacity, message_bytes);
  }
  // What the dense codecs' device encodes announce at once: the message of finite values.
  const size_t bytes = codec.wire_bytes(count, dtype, context.shape);
  if (bytes > capacity) return fail(ncclInvalidArgument, "emulated encode: capacity too small");
  *message_bytes = bytes;
  auto job = std::make_shared<Job>();
  job->add(input, count * dtype_size(dtype), true, false);
  job->add(context.error, context.error != nullptr ? count * sizeof(float) : 0, false, true);
  job->add(message, bytes, false, true);
  EncodeContext host = context;
  host.memory = Memory::kHost;
  host.stream = nullptr;
  Codec* encoder = &codec;
  job->run = [=](std::vector<Job::Buffer>& b) mutable {
    host.error = context.error != nullptr ? reinterpret_cast<float*>(b[1].host.data()) : nullptr;
    size_t written = 0;
    if (encoder->encode(b[0].host.data(), count, dtype, host, b[2].host.data(), bytes, &written) !=
        ncclSuccess) {
      return "emulated encode failed: " + std::string(last_error());
    }
    if (written != bytes) {
      return "emulated encode wrote " + std::to_string(written) + " bytes, announced " +
             std::to_string(bytes);
    }
    return std::string();
  };
  return launch(job, context.stream);
}

ncclResult_t EmulatedCompute::encode_sparse(Codec& codec, const void* input, size_t count,
                                            DType dtype, const EncodeContext& context,
                                            void* message, size_t capacity, size_t* message_bytes) {
  // The codec's state (DGC's momentum) is host memory here: the CPU code runs on it.
  auto job = std::make_shared<Job>();
  job->add(input, count * dtype_size(dtype), true, false);
  job->add(context.error, context.error != nullptr ? count * sizeof(float) : 0, false, true);
  job->add(message, capacity, false, true);
  EncodeContext host = context;
  host.memory = Memory::kHost;
  host.stream = nullptr;
  Codec* encoder = &codec;
  auto written = std::make_shared<size_t>(0);
  job->run = [=](std::vector<Job::Buffer>& b) mutable {
    host.error = context.error != nullptr ? reinterpret_cast<float*>(b[1].host.data()) : nullptr;
    if (encoder->encode(b[0].host.data(), count, dtype, host, b[2].host.data(), capacity,
                        written.get()) != ncclSuccess) {
      return "emulated sparse encode failed: " + std::string(last_error());
    }
    return std::string();
  };
  TERSE_CHECK(launch(job, context.stream));
  // As the device selection does (sparse_select_kernels.h): it waits for the stream to learn
  // how many elements it kept.
  if (cudaStreamSynchronize(static_cast<cudaStream_t>(context.stream)) != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "emulated sparse encode: waiting for the stream");
  }
  if (*written == 0) return fail(ncclInternalError, "emulated sparse encode wrote nothing");
  *message_bytes = *written;
  return ncclSuccess;
}

bool EmulatedCompute::fuses_compensation(const Codec& codec) const {
  return codec.fuses_device_compensation();
}

ncclResult_t EmulatedCompute::encode_compensated(Codec& codec, DType input_type, const void* input,
                                                 float* residual, size_t count,
                                                 const EncodeContext& context, void* message,
                                                 size_t capacity, size_t* message_bytes) {
  // The message of v = input + residual in fp32, as the device's fused encode announces it.
  const size_t bytes = codec.wire_bytes(count, DType::kFloat32, context.shape);
  if (bytes > capacity) return fail(ncclInvalidArgument, "emulated encode: capacity too small");
  *message_bytes = bytes;
  auto job = std::make_shared<Job>();
  job->add(input, count * dtype_size(input_type), true, false);
  job->add(residual, count * sizeof(float), true, true);
  job->add(message, bytes, false, true);
  EncodeContext host = context;
  host.memory = Memory::kHost;
  host.stream = nullptr;
  Codec* encoder = &codec;
  job->run = [=](std::vector<Job::Buffer>& b) mutable {
    size_t written = 0;
    if (encoder->encode_compensated(b[0].host.data(), input_type,
                                    reinterpret_cast<float*>(b[1].host.data()), count, host,
                                    b[2].host.data(), bytes, &written) != ncclSuccess) {
      return "emulated compensated encode failed: " + std::string(last_error());
    }
    if (written != bytes) {
      return "emulated compensated encode wrote " + std::to_string(written) + " bytes, announced " +
             std::to_string(bytes);
    }
    return std::string();
  };
  return launch(job, context.stream);
}

ncclResult_t EmulatedCompute::low_rank(const LowRankStep& step, void* stream) {
  const size_t matrix = step.rows * step.cols * sizeof(float);
  const size_t p_bytes = step.rows * static_cast<size_t>(step.rank) * sizeof(float);
  const size_t q_bytes = step.cols * static_cast<size_t>(step.rank) * sizeof(float);
  const bool reads_m = step.op == LowRankOp::kComputeP || step.op == LowRankOp::kComputeQ ||
                       step.op == LowRankOp::kResidual;
  const bool writes_out = step.op == LowRankOp::kResidual || step.op == LowRankOp::kReconstruct;
  auto job = std::make_shared<Job>();
  // Buffers: 0 m, 1 p, 2 q, 3 out; each copied in where the step reads it, out where it writes.
  job->add(step.m, reads_m ? matrix : 0, true, false);
  job->add(step.p, p_bytes, step.op != LowRankOp::kComputeP,
           step.op == LowRankOp::kComputeP || step.op == LowRankOp::kOrthogonalize);
  job->add(step.q, step.op == LowRankOp::kOrthogonalize ? 0 : q_bytes,
           step.op != LowRankOp::kComputeQ, step.op == LowRankOp::kComputeQ);
  job->add(step.out, writes_out ? matrix : 0, false, true);
  job->run = [step](std::vector<Job::Buffer>& b) {
    LowRankStep host = step;
    host.m = reinterpret_cast<const float*>(b[0].host.data());
    host.p = reinterpret_cast<float*>(b[1].host.data());
    host.q = reinterpret_cast<float*>(b[2].host.data());
    host.out = reinterpret_cast<float*>(b[3].host.data());
    if (run_low_rank_step(host, Memory::kHost, nullptr) != ncclSuccess) {
      return "emulated low-rank step failed: " + std::string(last_error());
    }
    return std::string();
  };
  return launch(job, stream);
}

ncclResult_t EmulatedCompute::decode(const Codec& codec, const void* message,
                                     const void* host_message, size_t message_bytes, void* output,
                                     size_t count, DType dtype, bool accumulate, void* stream) {
  // Validated from the host bytes before anything is enqueued, as the real device decode does.
  std::vector<uint8_t> scratch(count * dtype_size(dtype));
  TERSE_CHECK(codec.decode(host_message, message_bytes, scratch.data(), count, dtype, false,
                           DecodeContext{}));
  auto job = std::make_shared<Job>();
  job->add(message, message_bytes, true, false);
  job->add(output, count * dtype_size(dtype), accumulate, true);
  const Codec* decoder = &codec;
  job->run = [=](std::vector<Job::Buffer>& b) {
    if (decoder->decode(b[0].host.data(), message_bytes, b[1].host.data(), count, dtype, accumulate,
                        DecodeContext{}) != ncclSuccess) {
      return "emulated decode failed: " + std::string(last_error());
    }
    return std::string();
  };
  return launch(job, stream);
}

}  // namespace test
}  // namespace terse
