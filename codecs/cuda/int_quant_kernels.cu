// CUDA kernels of the int8/int4/int2 quantizers: thin loops around int_quant_math.h, so the
// device writes the same bytes as the host.
//
// One warp per quantisation block: the lanes stride over the block (coalesced loads), reduce the
// extent with shuffles (min/max are order-free, so every lane and the CPU agree), and then each
// lane packs code bytes k = lane, lane + 32, ...: with the planar packing, byte k's elements are
// k, k + s, ..., so both the element loads and the byte stores of a warp are contiguous.
#include <cuda_runtime.h>

#include <type_traits>

#include "codecs/cuda/int_quant_kernels.h"
#include "codecs/device_support.h"
#include "codecs/int_quant_math.h"
#include "common/result.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ size_t global_warp() {
  return (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
}

__device__ __forceinline__ size_t warp_count() {
  return size_t(gridDim.x) * blockDim.x / kWarpSize;
}

template <bool kAbsMax>
__device__ __forceinline__ IntQuantExtent warp_extent(IntQuantExtent extent) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    IntQuantExtent other;
    other.lo = __shfl_xor_sync(kFullMask, extent.lo, offset);
    other.hi = __shfl_xor_sync(kFullMask, extent.hi, offset);
    other.nan = __shfl_xor_sync(kFullMask, extent.nan ? 1 : 0, offset) != 0;
    int_quant_merge<kAbsMax>(&extent, other);
  }
  return extent;
}

// The loop over blocks is warp-uniform (b depends on the warp only), so every lane reaches the
// shuffles.
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
__global__ void int_quant_encode_kernel(const typename In::Storage* input, size_t count,
                                        uint32_t block, uint64_t seed, uint8_t* payload,
                                        IntQuantLayout layout, float* error) {
  const unsigned lane = threadIdx.x % kWarpSize;
  for (size_t b = global_warp(); b < layout.blocks; b += warp_count()) {
    const size_t first = b * block;
    const size_t r = count - first < block ? count - first : size_t(block);
    const size_t s = int_quant_code_bytes(r, kBits);
    const typename In::Storage* x = input + first;
    IntQuantExtent extent = int_quant_empty_extent<kAbsMax>();
    for (size_t j = lane; j < r; j += kWarpSize) int_quant_extend<kAbsMax>(&extent, In::load(x[j]));
    const IntQuantBlock params = int_quant_block<kBits, kAbsMax>(warp_extent<kAbsMax>(extent));
    if (lane == 0) {
      int_quant_store_float(payload + b * sizeof(float), params.scale);
      if (!kAbsMax)
        int_quant_store_float(payload + layout.minimums + b * sizeof(float), params.base);
    }
    uint8_t* codes = payload + layout.codes + first * kBits / 8;
    float* block_error = error != nullptr ? error + first : nullptr;
    if (!params.finite) {
      for (size_t k = lane; k < s; k += kWarpSize) codes[k] = 0;
      if (block_error != nullptr) {
        for (size_t j = lane; j < r; j += kWarpSize) block_error[j] = params.scale;
      }
    } else if (r == block) {
      for (size_t k = lane; k < s; k += kWarpSize) {
        codes[k] = int_quant_encode_byte<In, kBits, kAbsMax, kStochastic, false>(
            x, r, s, k, params, seed, first, block_error);
      }
    } else {
      for (size_t k = lane; k < s; k += kWarpSize) {
        codes[k] = int_quant_encode_byte<In, kBits, kAbsMax, kStochastic, true>(
            x, r, s, k, params, seed, first, block_error);
      }
    }
  }
}

// Lowers *first_invalid to the index of every block a host decoder would refuse.
// int_quant_encode_kernel over v = input + residual, v never stored: the extent pass reads v, the
// encode pass recomputes it and overwrites residual[j] with v - decoded. Each element j belongs
// to one lane of one warp, and the warp's shuffles order every read of its block before any
// write, so reading and writing the residual in place is safe. Same arithmetic as compensating
// into fp32 first (one fp32 add, then In == fp32's load), so the same bytes.
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
__global__ void int_quant_encode_compensated_kernel(const typename In::Storage* input,
                                                    float* residual, size_t count, uint32_t block,
                                                    uint64_t seed, uint8_t* payload,
                                                    IntQuantLayout layout) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  const unsigned lane = threadIdx.x % kWarpSize;
  for (size_t b = global_warp(); b < layout.blocks; b += warp_count()) {
    const size_t first = b * block;
    const size_t r = count - first < block ? count - first : size_t(block);
    const size_t s = int_quant_code_bytes(r, kBits);
    const typename In::Storage* x = input + first;
    float* e = residual + first;
    IntQuantExtent extent = int_quant_empty_extent<kAbsMax>();
    for (size_t j = lane; j < r; j += kWarpSize) {
      int_quant_extend<kAbsMax>(&extent, In::load(x[j]) + e[j]);
    }
    const IntQuantBlock params = int_quant_block<kBits, kAbsMax>(warp_extent<kAbsMax>(extent));
    if (lane == 0) {
      int_quant_store_float(payload + b * sizeof(float), params.scale);
      if (!kAbsMax)
        int_quant_store_float(payload + layout.minimums + b * sizeof(float), params.base);
    }
    uint8_t* codes = payload + layout.codes + first * kBits / 8;
    if (!params.finite) {
      for (size_t k = lane; k < s; k += kWarpSize) codes[k] = 0;
      for (size_t j = lane; j < r; j += kWarpSize) e[j] = params.scale;
      continue;
    }
    for (size_t k = lane; k < s; k += kWarpSize) {
      uint32_t byte = 0;
#pragma unroll
      for (int p = 0; p < Codes::kPerByte; ++p) {
        const size_t j = k + p * s;
        if (j >= r) break;
        const float value = In::load(x[j]) + e[j];
        const uint32_t code =
            int_quant_code<kBits, kAbsMax, kStochastic>(value, params, seed, first + j);
        byte |= code << (p * kBits);
        e[j] = value - int_quant_value<kBits, kAbsMax>(code, params.scale, params.base);
      }
      codes[k] = static_cast<uint8_t>(byte);
    }
  }
}

template <int kBits, bool kAbsMax>
__global__ void int_quant_validate_kernel(const uint8_t* payload, IntQuantLayout layout,
                                          unsigned long long* first_invalid) {
  for (size_t b = size_t(blockIdx.x) * blockDim.x + threadIdx.x; b < layout.blocks;
       b += size_t(gridDim.x) * blockDim.x) {
    const float scale = int_quant_load_float(payload + b * sizeof(float));
    const float base =
        kAbsMax ? 0.0f : int_quant_load_float(payload + layout.minimums + b * sizeof(float));
    if (!int_quant_block_is_decodable<kBits, kAbsMax>(scale, base)) {
      atomicMin(first_invalid, static_cast<unsigned long long>(b));
    }
  }
}

template <typename Out, int kBits, bool kAbsMax, bool kAccumulate>
__global__ void int_quant_decode_kernel(const uint8_t* payload, size_t count, uint32_t block,
                                        IntQuantLayout layout, typename Out::Storage* output) {
  const unsigned lane = threadIdx.x % kWarpSize;
  for (size_t b = global_warp(); b < layout.blocks; b += warp_count()) {
    const size_t first = b * block;
    const size_t r = count - first < block ? count - first : size_t(block);
    const size_t s = int_quant_code_bytes(r, kBits);
    const float scale = int_quant_load_float(payload + b * sizeof(float));
    const float base =
        kAbsMax ? 0.0f : int_quant_load_float(payload + layout.minimums + b * sizeof(float));
    const uint8_t* codes = payload + layout.codes + first * kBits / 8;
    typename Out::Storage* out = output + first;
    if (r == block) {
      for (size_t k = lane; k < s; k += kWarpSize) {
        int_quant_decode_byte<Out, kBits, kAbsMax, kAccumulate, false>(codes[k], r, s, k, scale,
                                                                       base, out);
      }
    } else {
      for (size_t k = lane; k < s; k += kWarpSize) {
        int_quant_decode_byte<Out, kBits, kAbsMax, kAccumulate, true>(codes[k], r, s, k, scale,
                                                                      base, out);
      }
    }
  }
}

template <typename Fn>
void dispatch_bool(bool value, Fn&& fn) {
  if (value) {
    fn(std::true_type{});
  } else {
    fn(std::false_type{});
  }
}

template <typename Fn>
void dispatch_bits(int bits, Fn&& fn) {
  switch (bits) {
    case 2:
      fn(std::integral_constant<int, 2>{});
      break;
    case 4:
      fn(std::integral_constant<int, 4>{});
      break;
    default:
      fn(std::integral_constant<int, 8>{});
  }
}

// Grid for one warp per quantisation block.
unsigned grid_for_blocks(size_t blocks) {
  return grid_for(blocks * kWarpSize, kThreads);
}

}  // namespace

ncclResult_t launch_int_quant_encode(int bits, bool absmax, bool stochastic, DType input_type,
                                     const void* input, size_t count, uint32_t block, uint64_t seed,
                                     void* payload, float* error, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const IntQuantLayout layout = int_quant_layout(count, block, bits, absmax);
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    dispatch_bits(bits, [&](auto bits_type) {
      dispatch_bool(absmax, [&](auto absmax_type) {
        dispatch_bool(stochastic, [&](auto stochastic_type) {
          int_quant_encode_kernel<In, decltype(bits_type)::value, decltype(absmax_type)::value,
                                  decltype(stochastic_type)::value>
              <<<grid_for_blocks(layout.blocks), kThreads, 0, cuda_stream>>>(
                  static_cast<const typename In::Storage*>(input), count, block, seed,
                  static_cast<uint8_t*>(payload), layout, error);
        });
      });
    });
  });
  return check_launch("int quantizer encode");
}

ncclResult_t launch_int_quant_encode_compensated(int bits, bool absmax, bool stochastic,
                                                 DType input_type, const void* input,
                                                 float* residual, size_t count, uint32_t block,
                                                 uint64_t seed, void* payload, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const IntQuantLayout layout = int_quant_layout(count, block, bits, absmax);
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    dispatch_bits(bits, [&](auto bits_type) {
      dispatch_bool(absmax, [&](auto absmax_type) {
        dispatch_bool(stochastic, [&](auto stochastic_type) {
          int_quant_encode_compensated_kernel<In, decltype(bits_type)::value,
                                              decltype(absmax_type)::value,
                                              decltype(stochastic_type)::value>
              <<<grid_for_blocks(layout.blocks), kThreads, 0, cuda_stream>>>(
                  static_cast<const typename In::Storage*>(input), residual, count, block, seed,
                  static_cast<uint8_t*>(payload), layout);
        });
      });
    });
  });
  return check_launch("int quantizer compensated encode");
}

ncclResult_t launch_int_quant_validate(int bits, bool absmax, const void* payload, size_t count,
                                       uint32_t block, void* stream, size_t* first_invalid,
                                       float* scale, float* base) {
  const IntQuantLayout layout = int_quant_layout(count, block, bits, absmax);
  *first_invalid = layout.blocks;
  if (layout.blocks == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const uint8_t* bytes = static_cast<const uint8_t*>(payload);
  // A stream-ordered allocation from the default pool: cheap after the first call, and no state
  // in the (const, possibly shared) codec.
  unsigned long long* device_answer = nullptr;
  cudaError_t status = cudaMallocAsync(reinterpret_cast<void**>(&device_answer),
                                       sizeof(*device_answer), cuda_stream);
  if (status != cudaSuccess)
    return cuda_call_failed(status, "int quantizer validate: cudaMallocAsync");
  status = cudaMemsetAsync(device_answer, 0xff, sizeof(*device_answer), cuda_stream);
  if (status == cudaSuccess) {
    dispatch_bits(bits, [&](auto bits_type) {
      dispatch_bool(absmax, [&](auto absmax_type) {
        int_quant_validate_kernel<decltype(bits_type)::value, decltype(absmax_type)::value>
            <<<grid_for(layout.blocks, kThreads), kThreads, 0, cuda_stream>>>(bytes, layout,
                                                                              device_answer);
      });
    });
    status = cudaGetLastError();
  }
  unsigned long long answer = ~0ull;
  if (status == cudaSuccess) {
    status = cudaMemcpyAsync(&answer, device_answer, sizeof(answer), cudaMemcpyDeviceToHost,
                             cuda_stream);
  }
  cudaError_t free_status = cudaFreeAsync(device_answer, cuda_stream);
  if (status == cudaSuccess) status = free_status;
  if (status == cudaSuccess) status = cudaStreamSynchronize(cuda_stream);
  if (status != cudaSuccess) return cuda_call_failed(status, "int quantizer validate");
  if (answer >= layout.blocks) return ncclSuccess;
  // Fetch the offending values for the error message.
  *first_invalid = static_cast<size_t>(answer);
  *base = 0.0f;
  status = cudaMemcpyAsync(scale, bytes + answer * sizeof(float), sizeof(float),
                           cudaMemcpyDeviceToHost, cuda_stream);
  if (status == cudaSuccess && !absmax) {
    status = cudaMemcpyAsync(base, bytes + layout.minimums + answer * sizeof(float), sizeof(float),
                             cudaMemcpyDeviceToHost, cuda_stream);
  }
  if (status == cudaSuccess) status = cudaStreamSynchronize(cuda_stream);
  if (status != cudaSuccess) return cuda_call_failed(status, "int quantizer validate");
  return ncclSuccess;
}

ncclResult_t launch_int_quant_decode(int bits, bool absmax, const void* payload, size_t count,
                                     uint32_t block, DType output_type, void* output,
                                     bool accumulate, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const IntQuantLayout layout = int_quant_layout(count, block, bits, absmax);
  dispatch_dtype(output_type, [&](auto out) {
    using Out = decltype(out);
    dispatch_bits(bits, [&](auto bits_type) {
      dispatch_bool(absmax, [&](auto absmax_type) {
        dispatch_bool(accumulate, [&](auto accumulate_type) {
          int_quant_decode_kernel<Out, decltype(bits_type)::value, decltype(absmax_type)::value,
                                  decltype(accumulate_type)::value>
              <<<grid_for_blocks(layout.blocks), kThreads, 0, cuda_stream>>>(
                  static_cast<const uint8_t*>(payload), count, block, layout,
                  static_cast<typename Out::Storage*>(output));
        });
      });
    });
  });
  return check_launch("int quantizer decode");
}

}  // namespace terse
