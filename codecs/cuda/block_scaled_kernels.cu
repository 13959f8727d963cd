// CUDA kernels of the block-scaled codecs (mxfp8, mxfp4, nvfp4): thin loops around
// block_scaled_math.h and minifloat.h, so the device writes the same bytes as the host.
//
// Encode: one thread per element, a group of `block` lanes (32, a warp, for MX; 16, half a warp,
// for nvfp4) per block. The group's max |x| is a shuffle reduction of the magnitude bits (an
// order-free max, NaN above every number, as on the host); every lane derives the block's
// parameters, lane 0 of the group writes the scale byte, and for 4-bit codes each even lane packs
// its code with its odd neighbour's. nvfp4 first reduces the tensor's max |x| into the header's
// param1 (atomicMax on the bits) and turns it into the tensor scale with one thread.
// Decode: one thread per element.
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "codecs/block_scaled_math.h"
#include "codecs/cuda/block_scaled_kernels.h"
#include "codecs/device_support.h"
#include "codecs/rounding_random.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// The header's param1 (nvfp4's tensor scale) as a word in a device message.
constexpr size_t kTensorScaleOffset = offsetof(WireHeader, param1);

__device__ __forceinline__ uint32_t group_max(uint32_t bits, unsigned width) {
  for (unsigned offset = width / 2; offset > 0; offset /= 2) {
    const uint32_t other = __shfl_xor_sync(kFullMask, bits, offset);
    bits = other > bits ? other : bits;
  }
  return bits;
}

// The tensor's max |x| bits, NaN-sticky, into *amax_bits (zero beforehand).
template <typename In>
__global__ void tensor_max_kernel(const typename In::Storage* input, size_t count,
                                  uint32_t* amax_bits) {
  uint32_t bits = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t a = float_bits(In::load(input[i])) & 0x7fffffffu;
    bits = a > bits ? a : bits;
  }
  bits = group_max(bits, 32);
  if (threadIdx.x % 32 == 0) atomicMax(amax_bits, bits);
}

__global__ void tensor_scale_kernel(uint32_t* word) {
  *word = float_bits(nv_tensor_scale(bits_float(*word)));
}

// One element per thread; the grid covers whole groups (threads past `count` take part in the
// shuffles with a zero). kNv: nvfp4 (E2M1, blocks of 16, tensor scale at *tensor_scale_word).
template <typename In, typename F, bool kNv, bool kStochastic>
__global__ void block_scaled_encode_kernel(const typename In::Storage* input, size_t count,
                                           uint64_t seed, const uint32_t* tensor_scale_word,
                                           uint8_t* payload, BlockScaledLayout layout,
                                           float* error) {
  constexpr unsigned kBlock = kNv ? kNvBlock : kMxBlock;
  const RoundingKey key = rounding_key(seed);
  const float tensor_scale = kNv ? bits_float(*tensor_scale_word) : 0.0f;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t padded = layout.blocks * kBlock;
  // The loop condition is warp-uniform (i - lane steps by whole warps), so every lane reaches
  // every shuffle; lanes past the last group (half a warp of nvfp4) only take part in them.
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i - threadIdx.x % 32 < padded;
       i += stride) {
    const bool in_range = i < count;
    const float v = in_range ? In::load(input[i]) : 0.0f;
    const float amax = bits_float(group_max(float_bits(v) & 0x7fffffffu, kBlock));
    const bool finite = block_scaled_is_finite(amax);
    const float u = kStochastic ? rounding_uniform(key, uint64_t(i)) : 0.0f;
    uint32_t scale, code;
    float value;
    if (kNv) {
      scale = block_scaled_is_finite(tensor_scale) && finite
                  ? nv_block_scale_code(amax, tensor_scale)
                  : 0u;
      const float decode_scale = nv_decode_scale(scale, tensor_scale);
      code = nv_element_code<kStochastic>(v, nv_block_divisor(decode_scale), u);
      value = nv_element_value(code, decode_scale);
    } else {
      const int e = mx_scale_exponent<F>(amax);
      scale = finite ? e8m0_byte(e) : kE8M0Nan;
      code = mx_element_code<F, kStochastic>(v, mx_inverse_scale(e), u);
      value = mx_element_value<F>(code, mx_decode_scale(e));
    }
    if (!finite) code = 0;
    const uint32_t next = __shfl_down_sync(kFullMask, code, 1);
    if (!in_range) continue;
    if (i % kBlock == 0) payload[i / kBlock] = static_cast<uint8_t>(scale);
    uint8_t* codes = payload + layout.codes;
    if (F::kBits == 8) {
      codes[i] = static_cast<uint8_t>(code);
    } else if (i % 2 == 0) {
      codes[i / 2] = static_cast<uint8_t>(code | (i + 1 < count ? next << 4 : 0u));
    }
    if (error != nullptr) error[i] = finite ? v - value : bits_float(0x7fc00000u);
  }
}

template <typename Out, typename F, bool kNv, bool kAccumulate>
__global__ void block_scaled_decode_kernel(const uint8_t* payload, size_t count, float tensor_scale,
                                           BlockScaledLayout layout,
                                           typename Out::Storage* output) {
  constexpr unsigned kBlock = kNv ? kNvBlock : kMxBlock;
  const uint8_t* codes = payload + layout.codes;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t scale = payload[i / kBlock];
    const uint32_t code =
        F::kBits == 8 ? codes[i] : (uint32_t(codes[i / 2]) >> (4 * (i % 2))) & 0xfu;
    float value = kNv ? nv_element_value(code, nv_decode_scale(scale, tensor_scale))
                      : mx_element_value<F>(code, mx_decode_scale(int(scale) - 127));
    value = saturate_to<Out>(value);
    if (kAccumulate) value = value + Out::load(output[i]);
    output[i] = Out::store(value);
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

// fn(F{}, kNv) for the kind's element format.
template <typename Fn>
void dispatch_format(BlockScaledKind kind, bool e5m2, Fn&& fn) {
  if (kind == BlockScaledKind::kNvfp4) {
    fn(E2M1{}, std::true_type{});
  } else if (kind == BlockScaledKind::kMxfp4) {
    fn(E2M1{}, std::false_type{});
  } else if (e5m2) {
    fn(E5M2{}, std::false_type{});
  } else {
    fn(E4M3{}, std::false_type{});
  }
}

}  // namespace

ncclResult_t launch_block_scaled_encode(BlockScaledKind kind, bool e5m2, bool stochastic,
                                        DType input_type, const void* input, size_t count,
                                        uint64_t seed, void* message, float* error, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const bool nv = kind == BlockScaledKind::kNvfp4;
  if (nv && reinterpret_cast<uintptr_t>(message) % 4 != 0) {
    return fail(ncclInvalidArgument, "nvfp4: device message %p is not 4-byte aligned", message);
  }
  const BlockScaledLayout layout =
      block_scaled_layout(count, nv ? kNvBlock : kMxBlock, kind == BlockScaledKind::kMxfp8 ? 8 : 4);
  uint32_t* tensor_scale_word =
      reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(message) + kTensorScaleOffset);
  uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
  const size_t padded = layout.blocks * (nv ? kNvBlock : kMxBlock);
  const unsigned grid = grid_for((padded + 31) / 32 * 32, kThreads);
  dispatch_dtype(input_type, [&](auto in) {
    using In = decltype(in);
    const auto* typed = static_cast<const typename In::Storage*>(input);
    if (nv) {
      // The header was written with param1 = 0: the max starts there.
      tensor_max_kernel<In><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
          typed, count, tensor_scale_word);
      tensor_scale_kernel<<<1, 1, 0, cuda_stream>>>(tensor_scale_word);
    }
    dispatch_format(kind, e5m2, [&](auto format, auto nv_type) {
      dispatch_bool(stochastic, [&](auto stochastic_type) {
        block_scaled_encode_kernel<In, decltype(format), decltype(nv_type)::value,
                                   decltype(stochastic_type)::value>
            <<<grid, kThreads, 0, cuda_stream>>>(typed, count, seed, tensor_scale_word, payload,
                                                 layout, error);
      });
    });
  });
  return check_launch("block-scaled encode");
}

ncclResult_t launch_block_scaled_decode(BlockScaledKind kind, bool e5m2, const void* payload,
                                        size_t count, float tensor_scale, DType output_type,
                                        void* output, bool accumulate, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const bool nv = kind == BlockScaledKind::kNvfp4;
  const BlockScaledLayout layout =
      block_scaled_layout(count, nv ? kNvBlock : kMxBlock, kind == BlockScaledKind::kMxfp8 ? 8 : 4);
  dispatch_dtype(output_type, [&](auto out) {
    using Out = decltype(out);
    dispatch_format(kind, e5m2, [&](auto format, auto nv_type) {
      dispatch_bool(accumulate, [&](auto accumulate_type) {
        block_scaled_decode_kernel<Out, decltype(format), decltype(nv_type)::value,
                                   decltype(accumulate_type)::value>
            <<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(
                static_cast<const uint8_t*>(payload), count, tensor_scale, layout,
                static_cast<typename Out::Storage*>(output));
      });
    });
  });
  return check_launch("block-scaled decode");
}

ncclResult_t copy_block_scaled_payload(const void* payload, size_t bytes, void* stream,
                                       void* host) {
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  cudaError_t status = cudaMemcpyAsync(host, payload, bytes, cudaMemcpyDeviceToHost, cuda_stream);
  if (status == cudaSuccess) status = cudaStreamSynchronize(cuda_stream);
  if (status != cudaSuccess) {
    return cuda_call_failed(status, "block-scaled decode: copying the payload to validate it");
  }
  return ncclSuccess;
}

}  // namespace terse
