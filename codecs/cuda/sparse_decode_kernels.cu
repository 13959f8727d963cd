#include "codecs/cuda/sparse_decode_kernels.h"
#include "codecs/cuda/sparse_scratch.cuh"
#include "codecs/device_support.h"
#include "codecs/sparse_math.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;

__global__ void validate_kernel(const uint32_t* indices, size_t kept, size_t count, bool strata,
                                unsigned long long* first_bad) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    uint64_t index = indices[j];
    bool valid;
    if (strata) {
      valid = index >= stratum_begin(j, count, kept) && index < stratum_begin(j + 1, count, kept);
    } else {
      valid = index < count && (j == 0 || indices[j - 1] < index);
    }
    if (!valid) atomicMin(first_bad, static_cast<unsigned long long>(j));
  }
}

template <typename Wire, typename Out>
__global__ void scatter_kernel(const typename Wire::Storage* values, const uint32_t* indices,
                               uint64_t seed, size_t kept, bool scaled,
                               typename Out::Storage* output, size_t count, bool accumulate) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    uint64_t index = indices != nullptr ? indices[j] : stratum_pick(seed, j, count, kept);
    float scale = 1.0f;
    if (scaled) {
      scale = static_cast<float>(stratum_begin(j + 1, count, kept) - stratum_begin(j, count, kept));
    }
    sparse_scatter_element<Wire, Out>(values, j, index, scale, scaled, output, accumulate);
  }
}

}  // namespace

ncclResult_t launch_sparse_validate(const uint32_t* indices, size_t kept, size_t count, bool strata,
                                    void* stream, size_t* first_bad) {
  *first_bad = kept;
  if (kept == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  SparseScratch scratch(cuda_stream);
  const size_t flag_at = scratch.reserve(sizeof(unsigned long long));
  TERSE_CHECK(scratch.allocate("sparse decode: scratch"));
  unsigned long long* flag = scratch.at<unsigned long long>(flag_at);
  unsigned long long result = kept;
  TERSE_SPARSE_CUDA(
      cudaMemcpyAsync(flag, &result, sizeof(result), cudaMemcpyHostToDevice, cuda_stream),
      "sparse decode: validating indices");
  validate_kernel<<<grid_for(kept, kThreads), kThreads, 0, cuda_stream>>>(indices, kept, count,
                                                                          strata, flag);
  TERSE_CHECK(check_launch("sparse decode: validate"));
  TERSE_SPARSE_CUDA(
      cudaMemcpyAsync(&result, flag, sizeof(result), cudaMemcpyDeviceToHost, cuda_stream),
      "sparse decode: validating indices");
  TERSE_SPARSE_CUDA(cudaStreamSynchronize(cuda_stream), "sparse decode: validating indices");
  *first_bad = static_cast<size_t>(result);
  return ncclSuccess;
}

ncclResult_t launch_sparse_scatter(DType value_type, const void* values, const uint32_t* indices,
                                   uint64_t seed, size_t kept, bool scaled, DType output_type,
                                   void* output, size_t count, bool accumulate, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  if (!accumulate) {
    TERSE_SPARSE_CUDA(cudaMemsetAsync(output, 0, count * dtype_size(output_type), cuda_stream),
                      "sparse decode: zeroing the output");
  }
  if (kept == 0) return ncclSuccess;
  dispatch_dtype(value_type, [&](auto wire) {
    using Wire = decltype(wire);
    dispatch_dtype(output_type, [&](auto out) {
      using Out = decltype(out);
      scatter_kernel<Wire, Out><<<grid_for(kept, kThreads), kThreads, 0, cuda_stream>>>(
          static_cast<const typename Wire::Storage*>(values), indices, seed, kept, scaled,
          static_cast<typename Out::Storage*>(output), count, accumulate);
    });
  });
  return check_launch("sparse decode: scatter");
}

}  // namespace terse
