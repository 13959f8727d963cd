#include "codecs/cuda/nonfinite_kernels.h"

#include <cuda_runtime.h>

#include "codecs/device_support.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;

template <typename In>
__global__ void find_nonfinite_kernel(const typename In::Storage* input, size_t count,
                                      unsigned int* flag) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    // Every writer writes 1: no atomic needed, and the common (finite) case writes nothing.
    if (!isfinite(In::load(input[i]))) *reinterpret_cast<volatile unsigned int*>(flag) = 1u;
  }
}

// EscapeKind's values (nonfinite_escapes.h): 1 +Inf, 2 -Inf, 3 NaN (quiet, the host's payload).
__device__ float escape_value(unsigned kind) {
  return kind == 1u   ? __int_as_float(0x7f800000)
         : kind == 2u ? __int_as_float(static_cast<int>(0xff800000u))
                      : __int_as_float(0x7fc00000);
}

template <typename Out>
__device__ void apply_one(typename Out::Storage* output, size_t i, unsigned kind, bool accumulate) {
  const float value = escape_value(kind);
  output[i] = Out::store(accumulate ? Out::load(output[i]) + value : value);
}

template <typename Out>
__global__ void apply_list_kernel(const uint8_t* body, uint64_t escapes,
                                  typename Out::Storage* output, bool accumulate) {
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < escapes;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    // The section follows the codec's bytes at any offset: the index is read bytewise.
    const uint8_t* at = body + 4 * e;
    const uint32_t index = static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 |
                           static_cast<uint32_t>(at[2]) << 16 | static_cast<uint32_t>(at[3]) << 24;
    apply_one<Out>(output, index, body[4 * escapes + e], accumulate);
  }
}

template <typename Out>
__global__ void apply_map_kernel(const uint8_t* body, size_t count, typename Out::Storage* output,
                                 bool accumulate) {
  const size_t bytes = (count + 3) / 4;
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < bytes;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const unsigned codes = body[b];
    if (codes == 0) continue;
    for (unsigned lane = 0; lane < 4; ++lane) {
      const unsigned kind = (codes >> (2 * lane)) & 3u;
      if (kind != 0) apply_one<Out>(output, 4 * b + lane, kind, accumulate);
    }
  }
}

}  // namespace

ncclResult_t launch_find_nonfinite(const void* input, size_t count, DType dtype, unsigned int* flag,
                                   void* stream) {
  if (count == 0) return ncclSuccess;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    find_nonfinite_kernel<In><<<grid_for(count, kThreads), kThreads, 0, s>>>(
        static_cast<const typename In::Storage*>(input), count, flag);
  });
  return check_launch("finding non-finite elements of a device tensor");
}

ncclResult_t load_nonfinite_kernels() {
  ncclResult_t result = ncclSuccess;
  for (int d = 0; d < kDTypeCount && result == ncclSuccess; ++d) {
    dispatch_dtype(static_cast<DType>(d), [&](auto type) {
      using T = decltype(type);
      const void* kernels[] = {reinterpret_cast<const void*>(&find_nonfinite_kernel<T>),
                               reinterpret_cast<const void*>(&apply_list_kernel<T>),
                               reinterpret_cast<const void*>(&apply_map_kernel<T>)};
      for (const void* kernel : kernels) {
        cudaFuncAttributes attributes;
        const cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
        if (error != cudaSuccess && result == ncclSuccess) {
          result = cuda_call_failed(error, "loading the non-finite escapes' kernels");
        }
      }
    });
  }
  return result;
}

ncclResult_t launch_apply_escapes(const uint8_t* body, bool list, uint64_t escapes, size_t count,
                                  void* output, DType dtype, bool accumulate, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(dtype, [&](auto out) {
    using Out = decltype(out);
    auto* typed = static_cast<typename Out::Storage*>(output);
    if (list) {
      apply_list_kernel<Out><<<grid_for(static_cast<size_t>(escapes), kThreads), kThreads, 0, s>>>(
          body, escapes, typed, accumulate);
    } else {
      apply_map_kernel<Out>
          <<<grid_for((count + 3) / 4, kThreads), kThreads, 0, s>>>(body, count, typed, accumulate);
    }
  });
  return check_launch("writing a message's non-finite escapes into a device tensor");
}

}  // namespace terse
