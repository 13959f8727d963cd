#include "codecs/cuda/sparse_encode_kernels.h"
#include "codecs/device_support.h"
#include "codecs/sparse_math.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;

// Index j of a message: explicit, or drawn from the strata.
__device__ uint64_t kept_index(const uint32_t* indices, uint64_t seed, size_t j, size_t count,
                               size_t kept) {
  return indices != nullptr ? indices[j] : stratum_pick(seed, j, count, kept);
}

__global__ void stratum_indices_kernel(uint64_t seed, size_t count, size_t kept,
                                       uint32_t* indices) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    indices[j] = static_cast<uint32_t>(stratum_pick(seed, j, count, kept));
  }
}

template <typename Storage>
__global__ void gather_kernel(const Storage* x, size_t count, const uint32_t* indices,
                              uint64_t seed, size_t kept, Storage* values) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    values[j] = x[kept_index(indices, seed, j, count, kept)];
  }
}

template <typename In>
__global__ void load_all_kernel(const typename In::Storage* x, size_t count, float* error) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    error[i] = In::load(x[i]);
  }
}

template <typename In>
__global__ void kept_error_kernel(const typename In::Storage* x, size_t count,
                                  const uint32_t* indices, uint64_t seed, size_t kept, bool scaled,
                                  float* error) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    uint64_t index = kept_index(indices, seed, j, count, kept);
    float value = In::load(x[index]);
    float decoded = value;
    if (scaled) {
      decoded = stratum_scaled(value, static_cast<float>(stratum_begin(j + 1, count, kept) -
                                                         stratum_begin(j, count, kept)));
    }
    error[index] = value - decoded;
  }
}

}  // namespace

ncclResult_t launch_stratum_indices(uint64_t seed, size_t count, size_t kept, uint32_t* indices,
                                    void* stream) {
  if (kept == 0) return ncclSuccess;
  stratum_indices_kernel<<<grid_for(kept, kThreads), kThreads, 0,
                           static_cast<cudaStream_t>(stream)>>>(seed, count, kept, indices);
  return check_launch("randomk indices");
}

ncclResult_t launch_gather_sparse_values(DType dtype, const void* data, size_t count,
                                         const uint32_t* indices, uint64_t seed, size_t kept,
                                         void* values, void* stream) {
  if (kept == 0) return ncclSuccess;
  dispatch_dtype(dtype, [&](auto in) {
    using Storage = typename decltype(in)::Storage;
    gather_kernel<Storage>
        <<<grid_for(kept, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const Storage*>(data), count, indices, seed, kept,
            static_cast<Storage*>(values));
  });
  return check_launch("sparse gather");
}

ncclResult_t launch_sparse_error(DType dtype, const void* data, size_t count,
                                 const uint32_t* indices, uint64_t seed, size_t kept, bool scaled,
                                 float* error, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    auto x = static_cast<const typename In::Storage*>(data);
    load_all_kernel<In><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(x, count, error);
    if (kept > 0) {
      kept_error_kernel<In><<<grid_for(kept, kThreads), kThreads, 0, cuda_stream>>>(
          x, count, indices, seed, kept, scaled, error);
    }
  });
  return check_launch("sparse error");
}

}  // namespace terse
