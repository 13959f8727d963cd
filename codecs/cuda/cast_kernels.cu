#include "codecs/cast_math.h"
#include "codecs/cuda/cast_kernels.h"
#include "codecs/device_support.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;

template <typename In, typename Wire>
__global__ void cast_encode_kernel(const typename In::Storage* input,
                                   typename Wire::Storage* payload, float* error, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    cast_encode_element<In, Wire>(input, payload, error, i);
  }
}

template <typename Wire, typename Out>
__global__ void cast_decode_kernel(const typename Wire::Storage* payload,
                                   typename Out::Storage* output, bool accumulate, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    cast_decode_element<Wire, Out>(payload, output, accumulate, i);
  }
}

template <typename Out>
__global__ void cast_scaled_kernel(const float* values, float scale, typename Out::Storage* output,
                                   size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    output[i] = Out::store(values[i] * scale);
  }
}

}  // namespace

ncclResult_t launch_cast_encode(DType input_type, DType wire_type, const void* input, void* payload,
                                float* error, size_t count, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    dispatch_dtype(wire_type, [&](auto wire) {
      using Wire = decltype(wire);
      cast_encode_kernel<In, Wire><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
          static_cast<const typename In::Storage*>(input),
          static_cast<typename Wire::Storage*>(payload), error, count);
    });
  });
  return check_launch("cast encode");
}

ncclResult_t launch_cast_decode(DType wire_type, const void* payload, DType output_type,
                                void* output, size_t count, bool accumulate, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(wire_type, [&](auto wire) {
    using Wire = decltype(wire);
    dispatch_dtype(output_type, [&](auto out) {
      using Out = decltype(out);
      cast_decode_kernel<Wire, Out><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
          static_cast<const typename Wire::Storage*>(payload),
          static_cast<typename Out::Storage*>(output), accumulate, count);
    });
  });
  return check_launch("cast decode");
}

ncclResult_t launch_cast_scaled(const float* values, float scale, DType output_type, void* output,
                                size_t count, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  dispatch_dtype(output_type, [&](auto out) {
    using Out = decltype(out);
    cast_scaled_kernel<Out><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
        values, scale, static_cast<typename Out::Storage*>(output), count);
  });
  return check_launch("scaled cast");
}

}  // namespace terse
