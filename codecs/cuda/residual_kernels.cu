// Error-feedback kernels: thin grid-stride loops around residual_math.h.
#include "codecs/cuda/residual_kernels.h"
#include "codecs/device_support.h"
#include "codecs/residual_math.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;

template <typename In>
__global__ void compensate_kernel(const typename In::Storage* input, const float* residual,
                                  float* compensated, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    compensate_element<In>(input, residual, compensated, i);
  }
}

template <typename Decoded>
__global__ void update_kernel(const float* compensated, const typename Decoded::Storage* decoded,
                              float* residual, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    update_residual_element<Decoded>(compensated, decoded, residual, i);
  }
}

}  // namespace

ncclResult_t launch_residual_compensate(DType input_type, const void* input, const float* residual,
                                        float* compensated, size_t count, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    compensate_kernel<In><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
        static_cast<const typename In::Storage*>(input), residual, compensated, count);
  });
  return check_launch("residual compensate");
}

ncclResult_t launch_residual_update(DType decoded_type, const float* compensated,
                                    const void* decoded, float* residual, size_t count,
                                    void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(decoded_type, [&](auto out) {
    using Decoded = decltype(out);
    update_kernel<Decoded><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
        compensated, static_cast<const typename Decoded::Storage*>(decoded), residual, count);
  });
  return check_launch("residual update");
}

}  // namespace terse
