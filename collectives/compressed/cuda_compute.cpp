// The real DeviceCompute (device_compute.h): the codecs' device path and the residual and cast
// kernels of codecs/cuda. Untested on a GPU so far: tests/compressed/device/ holds the GPU
// tests that must pass first (they skip without a device).
#include "collectives/compressed/device_compute.h"

#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/cast_kernels.h"
#include "codecs/cuda/nonfinite_kernels.h"
#include "codecs/cuda/residual_kernels.h"
#endif

namespace terse {

#if TERSE_HAVE_CUDA

namespace {

class CudaCompute final : public DeviceCompute {
 public:
  ncclResult_t load_kernels() override { return load_nonfinite_kernels(); }
  ncclResult_t compensate(DType input_type, const void* input, const float* residual, float* values,
                          size_t count, void* stream) override {
    if (residual != nullptr) {
      return launch_residual_compensate(input_type, input, residual, values, count, stream);
    }
    // A cast decode from the input's type to fp32 is the conversion alone (In::load).
    return launch_cast_decode(input_type, input, DType::kFloat32, values, count, false, stream);
  }
  ncclResult_t add(DType addend_type, const void* addend, float* sum, size_t count,
                   void* stream) override {
    // A cast decode from the addend's type, accumulating, is the widening add (In::load).
    return launch_cast_decode(addend_type, addend, DType::kFloat32, sum, count, true, stream);
  }
  ncclResult_t store(const float* values, float scale, DType output_type, void* output,
                     size_t count, void* stream) override {
    return launch_cast_scaled(values, scale, output_type, output, count, stream);
  }
  ncclResult_t encode(Codec& codec, const void* input, size_t count, DType dtype,
                      const EncodeContext& context, void* message, size_t capacity,
                      size_t* message_bytes) override {
    return codec.encode(input, count, dtype, context, message, capacity, message_bytes);
  }
  bool fuses_compensation(const Codec& codec) const override {
    return codec.fuses_device_compensation();
  }
  ncclResult_t encode_compensated(Codec& codec, DType input_type, const void* input,
                                  float* residual, size_t count, const EncodeContext& context,
                                  void* message, size_t capacity, size_t* message_bytes) override {
    return codec.encode_compensated(input, input_type, residual, count, context, message, capacity,
                                    message_bytes);
  }
  ncclResult_t low_rank(const LowRankStep& step, void* stream) override {
    return run_low_rank_step(step, Memory::kDevice, stream);
  }
  ncclResult_t decode(const Codec& codec, const void* message, const void* host_message,
                      size_t message_bytes, void* output, size_t count, DType dtype,
                      bool accumulate, void* stream) override {
    DecodeContext context;
    context.memory = Memory::kDevice;
    context.stream = stream;
    context.host_message = host_message;
    return codec.decode(message, message_bytes, output, count, dtype, accumulate, context);
  }
};

}  // namespace

ncclResult_t make_cuda_compute(std::unique_ptr<DeviceCompute>* out) {
  *out = std::make_unique<CudaCompute>();
  return ncclSuccess;
}

#else  // !TERSE_HAVE_CUDA

ncclResult_t make_cuda_compute(std::unique_ptr<DeviceCompute>*) {
  return fail(ncclInvalidUsage, "terse was built without CUDA: no device kernels");
}

#endif  // TERSE_HAVE_CUDA

}  // namespace terse
