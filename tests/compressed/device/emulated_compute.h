// A DeviceCompute (collectives/compressed/device_compute.h) for machines without a GPU: each
// "kernel" is a copy of its device inputs into host memory, a host function that runs the CPU
// code on them, and a copy of the outputs back, all on the stream it is given. Only CUDA
// runtime calls touch device memory, so under the fake CUDA runtime (device memory the host
// cannot read; tests/plugin/fake_cudart) it runs the CudaBackend's real ordering, copies and
// events with the CPU codecs' exact arithmetic: the results must equal the host path's bit for
// bit, which the reference model checks.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/compressed/device_compute.h"

namespace terse {
namespace test {

class EmulatedCompute final : public DeviceCompute {
 public:
  // Its kernels are host functions: nothing to load.
  ncclResult_t load_kernels() override { return ncclSuccess; }
  ncclResult_t compensate(DType input_type, const void* input, const float* residual, float* values,
                          size_t count, void* stream) override;
  ncclResult_t add(DType addend_type, const void* addend, float* sum, size_t count,
                   void* stream) override;
  ncclResult_t store(const float* values, float scale, DType output_type, void* output,
                     size_t count, void* stream) override;
  ncclResult_t encode(Codec& codec, const void* input, size_t count, DType dtype,
                      const EncodeContext& context, void* message, size_t capacity,
                      size_t* message_bytes) override;
  // As the real one decides (Codec::fuses_device_compensation), modelled by the CPU codec's
  // encode_compensated in one host function.
  bool fuses_compensation(const Codec& codec) const override;
  ncclResult_t encode_compensated(Codec& codec, DType input_type, const void* input,
                                  float* residual, size_t count, const EncodeContext& context,
                                  void* message, size_t capacity, size_t* message_bytes) override;
  // The CPU's step on host copies of its operands (the host GEMMs: bit for bit the host path's,
  // which cuBLAS is not).
  ncclResult_t low_rank(const LowRankStep& step, void* stream) override;
  ncclResult_t decode(const Codec& codec, const void* message, const void* host_message,
                      size_t message_bytes, void* output, size_t count, DType dtype,
                      bool accumulate, void* stream) override;

  // What a host function found wrong (an encode of another size than announced, a codec
  // failure), or "" when every emulated kernel ran as it should.
  std::string failures() const;

  struct Job;
  void record_failure(const std::string& failure);

 private:
  // A sparse codec's encode (Top-K, threshold, DGC, Random-K): its size depends on the data, so
  // it waits for the stream before it returns, as the real selection kernels do.
  ncclResult_t encode_sparse(Codec& codec, const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes);
  // Enqueues the copies in, `job`'s host function and the copies out on `stream`; the job is
  // kept until this object goes (the stream reads its buffers until then).
  ncclResult_t launch(const std::shared_ptr<Job>& job, void* stream);

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Job>> jobs_;
  std::string failures_;
};

}  // namespace test
}  // namespace terse
