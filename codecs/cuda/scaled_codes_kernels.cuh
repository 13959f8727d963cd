// CUDA kernels of the low-bit quantizers (sign, terngrad, qsgd), templated on the same quantizer
// policy `Math` as the CPU loops (scaled_codes_cpu.h), so both sides run one piece of math and
// write the same bytes. Included by each codec's .cu, which instantiates its launchers.
//
// Encode is two kernels on the stream: one warp per block computes the block's statistics in the
// fixed order of block_stats.h and writes the scale; then one thread per 32-bit word of the packed
// codes encodes its 32 / kBits elements (reading the scales just written), plus one small kernel
// for the linearly packed tail. Decode is one thread per element. Validation counts defects into
// a device flag that the host reads back before any output is written.
//
// Device messages must be 4-byte aligned (scales are fp32, code tiles are uint32 words); cudaMalloc
// gives 256.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "codecs/bit_packing.h"
#include "codecs/block_stats.h"
#include "codecs/device_support.h"
#include "codecs/dtype.h"
#include "codecs/rounding_random.h"
#include "codecs/scaled_codes.h"
#include "common/result.h"

namespace terse {
namespace scaled_codes_internal {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarp = 32;
static_assert(kWarp == kStatLanes, "one warp lane per statistics lane");

template <typename In, typename Math>
__global__ void scale_kernel(const Math math, const typename In::Storage* input, size_t count,
                             uint32_t block, size_t blocks, float* scales) {
  const unsigned lane = threadIdx.x % kWarp;
  const size_t warps = size_t(gridDim.x) * (blockDim.x / kWarp);
  // Warp-uniform loop: every lane of a warp sees the same b, so the full-mask shuffles are legal.
  for (size_t b = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / kWarp; b < blocks; b += warps) {
    const size_t start = b * block;
    const uint32_t n = uint32_t(count - start < block ? count - start : block);
    float max_abs = 0.0f, abs_sum = 0.0f, square_sum = 0.0f;
    for (uint32_t k = lane; k < n; k += kWarp) {
      accumulate_stats<Math::kStats>(In::load(input[start + k]), &max_abs, &abs_sum, &square_sum);
    }
    // The fold of fold_sum_lanes / fold_max_lanes: lane j combines with lane j + width.
    for (unsigned width = kWarp / 2; width >= 1; width /= 2) {
      const float other_max = __shfl_down_sync(0xffffffffu, max_abs, width);
      const float other_abs = __shfl_down_sync(0xffffffffu, abs_sum, width);
      const float other_square = __shfl_down_sync(0xffffffffu, square_sum, width);
      max_abs = sticky_max(max_abs, other_max);
      abs_sum = abs_sum + other_abs;
      square_sum = square_sum + other_square;
    }
    if (lane == 0) {
      BlockStats stats;
      stats.max_abs = max_abs;
      stats.abs_sum = abs_sum;
      stats.square_sum = square_sum;
      scales[b] = math.scale(stats, n);
    }
  }
}

// Encodes element `i` with the scale of its block; returns its code.
template <typename In, typename Math, bool kWithError>
__device__ __forceinline__ uint32_t encode_element(const Math& math,
                                                   const typename In::Storage* input, size_t i,
                                                   uint32_t block, RoundingKey key,
                                                   const float* scales, float* error) {
  const typename Math::Coder coder = math.coder(scales[block_of(i, block)]);
  const float x = In::load(input[i]);
  const float uniform = Math::kStochastic ? rounding_uniform(key, uint64_t(i)) : 0.0f;
  const uint32_t code = math.encode(coder, x, uniform);
  if (kWithError) error[i] = x - math.decode(coder, code);
  return code;
}

// One thread per 32-bit word of the full tiles: word j of a tile holds lane j of every chunk.
template <typename In, typename Math, bool kWithError>
__global__ void pack_kernel(const Math math, const typename In::Storage* input, size_t count,
                            uint32_t block, RoundingKey key, const float* scales, uint32_t* words,
                            float* error) {
  using Tile = PackedTile<Math::kBits>;
  const size_t total = (count / Tile::kTileElements) * Tile::kLanes;
  for (size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x; w < total;
       w += size_t(gridDim.x) * blockDim.x) {
    const size_t first = (w / Tile::kLanes) * Tile::kTileElements + w % Tile::kLanes;
    uint32_t word = 0;
#pragma unroll
    for (int c = 0; c < Tile::kChunks; ++c) {
      const size_t i = first + size_t(c) * Tile::kLanes;
      word |= encode_element<In, Math, kWithError>(math, input, i, block, key, scales, error)
              << (c * Math::kBits);
    }
    words[w] = word;
  }
}

// The linearly packed tail (fewer than one tile of elements): one thread per byte.
template <typename In, typename Math, bool kWithError>
__global__ void pack_tail_kernel(const Math math, const typename In::Storage* input, size_t count,
                                 uint32_t block, RoundingKey key, const float* scales,
                                 uint8_t* codes, float* error) {
  using Tile = PackedTile<Math::kBits>;
  constexpr int kPerByte = 8 / Math::kBits;
  const size_t full_tiles = count / Tile::kTileElements;
  const size_t tail_start = full_tiles * Tile::kTileElements;
  const size_t tail_bytes = packed_code_bytes(count - tail_start, Math::kBits);
  for (size_t q = threadIdx.x; q < tail_bytes; q += blockDim.x) {
    uint32_t byte = 0;
    for (int k = 0; k < kPerByte; ++k) {
      const size_t i = tail_start + q * kPerByte + k;
      if (i >= count) break;  // the last byte's unused bits stay zero
      byte |= encode_element<In, Math, kWithError>(math, input, i, block, key, scales, error)
              << (k * Math::kBits);
    }
    codes[full_tiles * Tile::kTileBytes + q] = static_cast<uint8_t>(byte);
  }
}

template <typename Out, typename Math, bool kAccumulate>
__global__ void decode_kernel(const Math math, const float* scales, const uint8_t* codes,
                              size_t count, uint32_t block, typename Out::Storage* output) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const typename Math::Coder coder = math.coder(scales[block_of(i, block)]);
    float value = saturate_to<Out>(math.decode(coder, packed_code<Math::kBits>(codes, count, i)));
    if (kAccumulate) value = value + Out::load(output[i]);
    output[i] = Out::store(value);
  }
}

template <typename Math>
__global__ void validate_kernel(const Math math, const float* scales, size_t blocks,
                                const uint8_t* codes, size_t code_bytes, uint32_t padding_mask,
                                unsigned* invalid) {
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  bool bad = false;
  for (size_t b = first; b < blocks; b += stride) bad |= !scale_is_valid(scales[b]);
  if (math.checks_codes()) {
    for (size_t k = first; k < code_bytes; k += stride) bad |= !math.byte_valid(codes[k]);
  }
  if (first == 0 && code_bytes > 0) bad |= (codes[code_bytes - 1] & padding_mask) != 0;
  if (bad) atomicOr(invalid, 1u);
}

inline ncclResult_t cuda_result(cudaError_t error, const char* what) {
  return error == cudaSuccess ? ncclSuccess : cuda_call_failed(error, what);
}

}  // namespace scaled_codes_internal

// Encodes `count` elements of `input` (device memory) into `payload` (the message after its
// header), writing `error` when non-null. Asynchronous on `stream`.
template <typename Math>
ncclResult_t launch_scaled_codes_encode(const Math& math, DType input_type, const void* input,
                                        size_t count, uint32_t block, uint64_t seed, void* payload,
                                        float* error, void* stream, const char* what) {
  namespace kernels = scaled_codes_internal;
  using Tile = PackedTile<Math::kBits>;
  if (count == 0) return ncclSuccess;
  ScaledCodesLayout layout;
  if (!scaled_codes_layout(count, block, Math::kBits, &layout)) {
    return fail(ncclInvalidArgument, "%s: %zu elements is too many", what, count);
  }
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  float* scales = static_cast<float*>(payload);
  uint8_t* codes = static_cast<uint8_t*>(payload) + layout.scale_bytes;
  const RoundingKey key = rounding_key(seed);
  const size_t words = (count / Tile::kTileElements) * Tile::kLanes;
  const bool tail = count % Tile::kTileElements != 0;
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    const auto* typed = static_cast<const typename In::Storage*>(input);
    kernels::scale_kernel<In, Math>
        <<<grid_for(layout.blocks * kernels::kWarp, kernels::kThreads), kernels::kThreads, 0,
           cuda_stream>>>(math, typed, count, block, layout.blocks, scales);
    auto pack = [&](auto with_error) {
      constexpr bool kWithError = decltype(with_error)::value;
      if (words > 0) {
        kernels::pack_kernel<In, Math, kWithError>
            <<<grid_for(words, kernels::kThreads), kernels::kThreads, 0, cuda_stream>>>(
                math, typed, count, block, key, scales, reinterpret_cast<uint32_t*>(codes), error);
      }
      if (tail) {
        kernels::pack_tail_kernel<In, Math, kWithError><<<1, kernels::kWarp, 0, cuda_stream>>>(
            math, typed, count, block, key, scales, codes, error);
      }
    };
    if (error != nullptr) {
      pack(std::true_type{});
    } else {
      pack(std::false_type{});
    }
  });
  return check_launch(what);
}

// Checks a payload (device memory) before decoding: every scale finite and not negative, every
// code valid for the policy, padding bits zero. Synchronises `stream`; `*valid` is the verdict.
template <typename Math>
ncclResult_t launch_scaled_codes_validate(const Math& math, const void* payload, size_t count,
                                          uint32_t block, void* stream, const char* what,
                                          bool* valid) {
  namespace kernels = scaled_codes_internal;
  *valid = true;
  if (count == 0) return ncclSuccess;
  ScaledCodesLayout layout;
  if (!scaled_codes_layout(count, block, Math::kBits, &layout)) {
    return fail(ncclInvalidArgument, "%s: %zu elements is too many", what, count);
  }
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const float* scales = static_cast<const float*>(payload);
  const uint8_t* codes = static_cast<const uint8_t*>(payload) + layout.scale_bytes;
  unsigned* flag = nullptr;
  TERSE_CHECK(kernels::cuda_result(
      cudaMallocAsync(reinterpret_cast<void**>(&flag), sizeof(unsigned), cuda_stream), what));
  unsigned invalid = 0;
  cudaError_t error = cudaMemsetAsync(flag, 0, sizeof(unsigned), cuda_stream);
  if (error == cudaSuccess) {
    const size_t items = layout.blocks > layout.code_bytes ? layout.blocks : layout.code_bytes;
    kernels::validate_kernel<Math>
        <<<grid_for(items, kernels::kThreads), kernels::kThreads, 0, cuda_stream>>>(
            math, scales, layout.blocks, codes, layout.code_bytes,
            packed_padding_mask(count, Math::kBits), flag);
    error = cudaGetLastError();
  }
  if (error == cudaSuccess) {
    error = cudaMemcpyAsync(&invalid, flag, sizeof(unsigned), cudaMemcpyDeviceToHost, cuda_stream);
  }
  cudaError_t free_error = cudaFreeAsync(flag, cuda_stream);
  if (error == cudaSuccess) error = free_error;
  if (error == cudaSuccess) error = cudaStreamSynchronize(cuda_stream);
  TERSE_CHECK(kernels::cuda_result(error, what));
  *valid = invalid == 0;
  return ncclSuccess;
}

// Decodes a validated payload (device memory) into `output`. Asynchronous on `stream`.
template <typename Math>
ncclResult_t launch_scaled_codes_decode(const Math& math, const void* payload, size_t count,
                                        uint32_t block, DType output_type, void* output,
                                        bool accumulate, void* stream, const char* what) {
  namespace kernels = scaled_codes_internal;
  if (count == 0) return ncclSuccess;
  ScaledCodesLayout layout;
  if (!scaled_codes_layout(count, block, Math::kBits, &layout)) {
    return fail(ncclInvalidArgument, "%s: %zu elements is too many", what, count);
  }
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const float* scales = static_cast<const float*>(payload);
  const uint8_t* codes = static_cast<const uint8_t*>(payload) + layout.scale_bytes;
  dispatch_dtype(output_type, [&](auto out) {
    using Out = decltype(out);
    auto* typed = static_cast<typename Out::Storage*>(output);
    if (accumulate) {
      kernels::decode_kernel<Out, Math, true>
          <<<grid_for(count, kernels::kThreads), kernels::kThreads, 0, cuda_stream>>>(
              math, scales, codes, count, block, typed);
    } else {
      kernels::decode_kernel<Out, Math, false>
          <<<grid_for(count, kernels::kThreads), kernels::kThreads, 0, cuda_stream>>>(
              math, scales, codes, count, block, typed);
    }
  });
  return check_launch(what);
}

}  // namespace terse
