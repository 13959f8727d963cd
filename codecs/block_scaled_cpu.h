// CPU loops of the block-scaled codecs (mxfp8, mxfp4, nvfp4) around block_scaled_math.h: encode,
// validate and decode a payload. Runtime ISA dispatch (TERSE_BLOCK_SCALED_DISPATCH) picks the
// AVX-512 or AVX2 clone; full blocks run with a constant trip count, so each block's elements are
// converted in vector lanes (the element conversion is branch-free float and integer arithmetic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codecs/block_scaled_avx2.h"
#include "codecs/block_scaled_avx512.h"
#include "codecs/block_scaled_math.h"
#include "codecs/dtype.h"
#include "codecs/dtype_convert.h"
#include "codecs/rounding_random.h"

#if defined(__GNUC__)
// Forced: a helper left out of line would be compiled for the baseline ISA, not the clone's.
#define TERSE_BLOCK_SCALED_INLINE __attribute__((always_inline)) inline
#define TERSE_BLOCK_SCALED_LAMBDA __attribute__((always_inline))
#else
#define TERSE_BLOCK_SCALED_LAMBDA
#define TERSE_BLOCK_SCALED_INLINE inline
#endif

// The loops' ISA clones: AVX2 and the baseline. GCC's AVX-512 clone gives up on the 16-element
// blocks of nvfp4 ("no vectype": a 16-lane float vector fed by 16 bytes) and runs them scalar,
// while AVX2 already converts at memory speed.
#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(TERSE_NO_CLONES)
#define TERSE_BLOCK_SCALED_DISPATCH __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TERSE_BLOCK_SCALED_DISPATCH
#endif

namespace terse {

// Stores r (<= block) codes of `bits` each, packed as block_scaled_math.h says.
template <int kBits>
TERSE_BLOCK_SCALED_INLINE void block_scaled_pack(const uint8_t* staged, size_t r, uint8_t* codes) {
  if (kBits == 8) {
    memcpy(codes, staged, r);
    return;
  }
  for (size_t j = 0; j + 1 < r; j += 2) {
    codes[j / 2] = static_cast<uint8_t>(staged[j] | (staged[j + 1] << 4));
  }
  if (r % 2 != 0) codes[r / 2] = staged[r - 1];
}

// Converts the r elements of one block: codes into `staged`, x - decoded into `error` when
// kError. `Element` is a functor (code of x and its index's uniform; value of a code).
template <typename In, bool kStochastic, bool kError, typename Element>
TERSE_BLOCK_SCALED_INLINE void block_scaled_convert(const typename In::Storage* x, size_t r,
                                                    RoundingKey key, uint64_t first,
                                                    const Element& element, uint8_t* staged,
                                                    float* error) {
  // Blocks are aligned to their size (a power of two below 2^32), so one block never straddles
  // a multiple of 2^32 and the index's high half is per block.
  const uint32_t low = static_cast<uint32_t>(first);
  const uint32_t high = static_cast<uint32_t>(first >> 32);
  for (size_t j = 0; j < r; ++j) {
    const float v = In::load(x[j]);
    const float u = kStochastic ? rounding_uniform(key, low + uint32_t(j), high) : 0.0f;
    const uint32_t code = element.code(v, u);
    staged[j] = static_cast<uint8_t>(code);
    if (kError) error[j] = v - element.value(code);
  }
}

// The full-block (constant trip count) or partial-block conversion, with or without error.
template <typename In, bool kStochastic, uint32_t kBlock, typename Element>
TERSE_BLOCK_SCALED_INLINE void block_scaled_convert_block(const typename In::Storage* x, size_t r,
                                                          RoundingKey key, uint64_t first,
                                                          const Element& element, uint8_t* staged,
                                                          float* error) {
  if (r == kBlock && error == nullptr) {
    block_scaled_convert<In, kStochastic, false>(x, kBlock, key, first, element, staged, error);
  } else if (r == kBlock) {
    block_scaled_convert<In, kStochastic, true>(x, kBlock, key, first, element, staged, error);
  } else if (error == nullptr) {
    block_scaled_convert<In, kStochastic, false>(x, r, key, first, element, staged, error);
  } else {
    block_scaled_convert<In, kStochastic, true>(x, r, key, first, element, staged, error);
  }
}

template <typename F, bool kStochastic>
struct MxElement {
  float inverse;
  MxDecodeScale scale;
  TERSE_BLOCK_SCALED_INLINE uint32_t code(float v, float u) const {
    return mx_element_code<F, kStochastic>(v, inverse, u);
  }
  TERSE_BLOCK_SCALED_INLINE float value(uint32_t code) const {
    return mx_element_value<F>(code, scale);
  }
};

template <bool kStochastic>
struct NvElement {
  float decode_scale;
  NvBlockDivisor divisor;
  TERSE_BLOCK_SCALED_INLINE uint32_t code(float v, float u) const {
    return nv_element_code<kStochastic>(v, divisor, u);
  }
  TERSE_BLOCK_SCALED_INLINE float value(uint32_t code) const {
    return nv_element_value(code, decode_scale);
  }
};

// Max |x| of n elements, NaN-sticky.
template <typename In>
TERSE_BLOCK_SCALED_INLINE float block_scaled_max(const typename In::Storage* x, size_t n) {
  float amax = 0.0f;
  for (size_t j = 0; j < n; ++j) amax = block_scaled_amax(amax, In::load(x[j]));
  return amax;
}

// Max |x| of a full block, in 8 lanes of magnitude bits (GCC leaves a running max scalar).
template <typename In, uint32_t kBlock>
TERSE_BLOCK_SCALED_INLINE float block_scaled_lanes_max(const typename In::Storage* x) {
  uint32_t lanes[8] = {};
  for (uint32_t j = 0; j < kBlock; j += 8) {
    for (int l = 0; l < 8; ++l) {
      const uint32_t a = float_bits(In::load(x[j + l])) & 0x7fffffffu;
      lanes[l] = a > lanes[l] ? a : lanes[l];
    }
  }
  float amax = 0.0f;
  for (int l = 0; l < 8; ++l) amax = block_scaled_amax(amax, bits_float(lanes[l]));
  return amax;
}

// Max |x| of a whole tensor, in 32 NaN-sticky lanes (a running scalar max does not vectorise).
template <typename In>
TERSE_BLOCK_SCALED_DISPATCH float block_scaled_tensor_max_generic(const typename In::Storage* x,
                                                                  size_t count) {
  float lanes[32] = {};
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    for (int j = 0; j < 32; ++j) lanes[j] = block_scaled_amax(lanes[j], In::load(x[i + j]));
  }
  float amax = block_scaled_max<In>(x + i, count - i);
  for (int j = 0; j < 32; ++j) amax = block_scaled_amax(amax, lanes[j]);
  return amax;
}

// One block: its scale byte, its codes, its error. `make` turns the block's max |x| into
// (scale byte, Element); a block that is not finite gets `bad_scale`, zero codes and a NaN
// error. Returns whether the block was finite.
template <typename In, int kBits, bool kStochastic, uint32_t kBlock, typename Make>
TERSE_BLOCK_SCALED_INLINE bool block_scaled_encode_block(const typename In::Storage* x, size_t r,
                                                         uint64_t first, RoundingKey key,
                                                         const Make& make, uint8_t* scale_byte,
                                                         uint8_t* codes, float* error) {
  uint8_t staged[kBlock];
  const float amax =
      r == kBlock ? block_scaled_lanes_max<In, kBlock>(x) : block_scaled_max<In>(x, r);
  uint32_t scale = 0;
  const auto element = make(amax, &scale);
  *scale_byte = static_cast<uint8_t>(scale);
  if (!block_scaled_is_finite(amax)) {
    memset(staged, 0, sizeof(staged));
    if (error != nullptr) {
      for (size_t j = 0; j < r; ++j) error[j] = bits_float(0x7fc00000u);
    }
  } else {
    block_scaled_convert_block<In, kStochastic, kBlock>(x, r, key, first, element, staged, error);
  }
  if (r == kBlock) {
    block_scaled_pack<kBits>(staged, kBlock, codes);
  } else {
    block_scaled_pack<kBits>(staged, r, codes);
  }
  return block_scaled_is_finite(amax);
}

// mxfp8/mxfp4 encode of blocks [begin, end); returns the first block whose input is not
// finite, or end.
template <typename In, typename F, bool kStochastic>
TERSE_BLOCK_SCALED_DISPATCH size_t mx_encode_range(const typename In::Storage* input, size_t count,
                                                   uint64_t seed, size_t begin, size_t end,
                                                   uint8_t* payload, float* error) {
  const BlockScaledLayout layout = block_scaled_layout(count, kMxBlock, F::kBits);
  const RoundingKey key = rounding_key(seed);
  const auto make = [](float amax, uint32_t* scale) TERSE_BLOCK_SCALED_LAMBDA {
    const int e = mx_scale_exponent<F>(amax);
    *scale = block_scaled_is_finite(amax) ? e8m0_byte(e) : kE8M0Nan;
    return MxElement<F, kStochastic>{mx_inverse_scale(e), mx_decode_scale(e)};
  };
  size_t first_bad = end;
  for (size_t b = begin; b < end; ++b) {
    const size_t first = b * kMxBlock;
    const size_t r = count - first < kMxBlock ? count - first : kMxBlock;
    const bool finite = block_scaled_encode_block<In, F::kBits, kStochastic, kMxBlock>(
        input + first, r, first, key, make, payload + b,
        payload + layout.codes + first * F::kBits / 8, error != nullptr ? error + first : nullptr);
    if (!finite && first_bad == end) first_bad = b;
  }
  return first_bad;
}

// nvfp4 encode of blocks [begin, end) (the tensor scale already computed and finite, or NaN:
// then every block is marked); returns the first block whose input is not finite, or end.
template <typename In, bool kStochastic>
TERSE_BLOCK_SCALED_DISPATCH size_t nv_encode_range(const typename In::Storage* input, size_t count,
                                                   float tensor_scale, uint64_t seed, size_t begin,
                                                   size_t end, uint8_t* payload, float* error) {
  const BlockScaledLayout layout = block_scaled_layout(count, kNvBlock, E2M1::kBits);
  const RoundingKey key = rounding_key(seed);
  const bool tensor_finite = block_scaled_is_finite(tensor_scale);
  const auto make = [&](float amax, uint32_t* scale) TERSE_BLOCK_SCALED_LAMBDA {
    *scale = tensor_finite && block_scaled_is_finite(amax) ? nv_block_scale_code(amax, tensor_scale)
                                                           : 0u;
    const float decode_scale = nv_decode_scale(*scale, tensor_scale);
    return NvElement<kStochastic>{decode_scale, nv_block_divisor(decode_scale)};
  };
  size_t first_bad = end;
  for (size_t b = begin; b < end; ++b) {
    const size_t first = b * kNvBlock;
    const size_t r = count - first < kNvBlock ? count - first : kNvBlock;
    const bool finite = block_scaled_encode_block<In, 4, kStochastic, kNvBlock>(
        input + first, r, first, key, make, payload + b, payload + layout.codes + first / 2,
        error != nullptr ? error + first : nullptr);
    if (!finite && first_bad == end) first_bad = b;
  }
  return first_bad;
}

// Decodes the r codes of one block (overwriting, or adding when kAccumulate).
template <typename Out, int kBits, bool kAccumulate, typename Element>
TERSE_BLOCK_SCALED_INLINE void block_scaled_decode_block(const uint8_t* codes, size_t r,
                                                         const Element& element,
                                                         typename Out::Storage* out) {
  // 4-bit codes are unpacked first, a byte at a time: picking nibble j % 2 per element is an
  // access pattern the vectoriser gives up on.
  uint8_t staged[kMxBlock];
  if (kBits == 4) {
    for (size_t k = 0; k < r / 2; ++k) {
      staged[2 * k] = codes[k] & 0xfu;
      staged[2 * k + 1] = codes[k] >> 4;
    }
    if (r % 2 != 0) staged[r - 1] = codes[r / 2] & 0xfu;
    codes = staged;
  }
  for (size_t j = 0; j < r; ++j) {
    float value = saturate_to<Out>(element.value(codes[j]));
    if (kAccumulate) value = value + Out::load(out[j]);
    out[j] = Out::store(value);
  }
}

// Decodes blocks [begin, the last).
template <typename Out, typename F, bool kAccumulate>
TERSE_BLOCK_SCALED_DISPATCH void mx_decode_range(const uint8_t* payload, size_t count, size_t begin,
                                                 typename Out::Storage* output) {
  const BlockScaledLayout layout = block_scaled_layout(count, kMxBlock, F::kBits);
  for (size_t b = begin; b < layout.blocks; ++b) {
    const size_t first = b * kMxBlock;
    const size_t r = count - first < kMxBlock ? count - first : kMxBlock;
    const MxElement<F, false> element{0.0f, mx_decode_scale(int(payload[b]) - 127)};
    const uint8_t* codes = payload + layout.codes + first * F::kBits / 8;
    if (r == kMxBlock) {
      block_scaled_decode_block<Out, F::kBits, kAccumulate>(codes, kMxBlock, element,
                                                            output + first);
    } else {
      block_scaled_decode_block<Out, F::kBits, kAccumulate>(codes, r, element, output + first);
    }
  }
}

template <typename Out, bool kAccumulate>
TERSE_BLOCK_SCALED_DISPATCH void nv_decode_range(const uint8_t* payload, size_t count,
                                                 float tensor_scale, size_t begin,
                                                 typename Out::Storage* output) {
  const BlockScaledLayout layout = block_scaled_layout(count, kNvBlock, E2M1::kBits);
  for (size_t b = begin; b < layout.blocks; ++b) {
    const size_t first = b * kNvBlock;
    const size_t r = count - first < kNvBlock ? count - first : kNvBlock;
    const float decode_scale = nv_decode_scale(payload[b], tensor_scale);
    const NvElement<false> element{decode_scale, nv_block_divisor(decode_scale)};
    const uint8_t* codes = payload + layout.codes + first / 2;
    if (r == kNvBlock) {
      block_scaled_decode_block<Out, 4, kAccumulate>(codes, kNvBlock, element, output + first);
    } else {
      block_scaled_decode_block<Out, 4, kAccumulate>(codes, r, element, output + first);
    }
  }
}

// Validation scans, first offender or `n` when none: scale bytes above `max_scale` (MX) or
// not a non-negative E4M3 number (nvfp4), and 8-bit element codes that are not numbers. Each is a
// branch-free pass (vectorised) before the rare search for the offender.
template <bool kNv>
TERSE_BLOCK_SCALED_DISPATCH size_t block_scaled_bad_scale(const uint8_t* scales, size_t n,
                                                          uint32_t max_scale) {
  bool all_valid = true;
  for (size_t b = 0; b < n; ++b) {
    all_valid &= kNv ? nv_block_scale_is_valid(scales[b]) : scales[b] <= max_scale;
  }
  for (size_t b = 0; !all_valid && b < n; ++b) {
    if (!(kNv ? nv_block_scale_is_valid(scales[b]) : scales[b] <= max_scale)) return b;
  }
  return n;
}

template <typename F>
TERSE_BLOCK_SCALED_DISPATCH size_t block_scaled_bad_code(const uint8_t* codes, size_t n) {
  // Bit 7 of (magnitude + 0x80 - kFirstSpecial) is set exactly for the specials: byte
  // arithmetic, 32 codes per AVX2 instruction.
  uint8_t specials = 0;
  for (size_t k = 0; k < n; ++k) {
    specials |= static_cast<uint8_t>((codes[k] & 0x7fu) + (0x80u - F::kFirstSpecial));
  }
  for (size_t k = 0; (specials & 0x80u) != 0 && k < n; ++k) {
    if (!F::is_number(codes[k])) return k;
  }
  return n;
}

// ---- Entry points: tensors go through the SIMD kernels for whole groups of 8 blocks where the
// CPU has AVX2 (block_scaled_avx2.h; the encoders of block_scaled_avx512.h where it has
// AVX-512), fp32 ones directly and the others through fp32 tiles converted by dtype_convert.h
// (exact both ways, so the kernels see the values the generic loops compute with); the rest, and
// a group holding a NaN or infinity, through the generic loops above on the tensor itself. Both
// write the same bytes.

// Elements per converted tile: 16 KiB of fp32, which stays in L1 between conversion and kernel.
constexpr size_t kBlockScaledTile = 4096;

// The number of blocks the SIMD kernels may cover.
inline size_t block_scaled_simd_blocks(size_t count, uint32_t block) {
#if TERSE_BLOCK_SCALED_AVX2
  if (block_scaled_avx2::available()) {
    return count / block / block_scaled_avx2::kGroup * block_scaled_avx2::kGroup;
  }
#endif
  (void)count;
  (void)block;
  return 0;
}

// Runs the fp32 encoder `kernel(x, begin, end)` (x: the elements of blocks [begin, end); returns
// where it stopped, as the kernels do) over blocks [begin, end) of a tensor of In: an fp32 tensor
// directly, another a tile at a time.
template <typename In, uint32_t kBlock, typename Kernel>
inline size_t block_scaled_encode_tiles(const typename In::Storage* input, size_t begin, size_t end,
                                        const Kernel& kernel) {
  if constexpr (std::is_same<In, F32>::value) {
    return kernel(input + begin * kBlock, begin, end);
  } else {
    constexpr size_t kTileBlocks = kBlockScaledTile / kBlock;  // a multiple of the group's 8
    alignas(64) float tile[kBlockScaledTile];
    for (size_t b = begin; b < end; b += kTileBlocks) {
      const size_t tile_end = b + kTileBlocks < end ? b + kTileBlocks : end;
      load_floats<In>(input + b * kBlock, (tile_end - b) * kBlock, tile);
      const size_t stopped = kernel(tile, b, tile_end);
      if (stopped != tile_end) return stopped;
    }
    return end;
  }
}

// Runs the fp32 decoder `kernel(out, begin, end, accumulate)` over blocks [0, blocks) into a
// tensor of Out: an fp32 one directly, another through a tile that store_floats then saturates,
// adds (kAccumulate) and converts as block_scaled_decode_block does per element.
template <typename Out, uint32_t kBlock, bool kAccumulate, typename Kernel>
inline void block_scaled_decode_tiles(size_t blocks, typename Out::Storage* output,
                                      const Kernel& kernel) {
  if constexpr (std::is_same<Out, F32>::value) {
    kernel(output, 0, blocks, std::integral_constant<bool, kAccumulate>{});
  } else {
    constexpr size_t kTileBlocks = kBlockScaledTile / kBlock;
    alignas(64) float tile[kBlockScaledTile];
    for (size_t b = 0; b < blocks; b += kTileBlocks) {
      const size_t tile_end = b + kTileBlocks < blocks ? b + kTileBlocks : blocks;
      kernel(tile, b, tile_end, std::false_type{});
      store_floats<Out, true, kAccumulate>(tile, (tile_end - b) * kBlock, output + b * kBlock);
    }
  }
}

template <typename In>
float block_scaled_tensor_max(const typename In::Storage* x, size_t count) {
#if TERSE_BLOCK_SCALED_AVX2
  if (block_scaled_avx2::available()) {
    if constexpr (std::is_same<In, F32>::value) {
      return bits_float(block_scaled_avx2::tensor_max_bits(x, count));
    } else {
      // The max of the tiles' maxima: magnitude bits, NaN above infinity, as the generic loop.
      alignas(64) float tile[kBlockScaledTile];
      uint32_t amax = 0;
      for (size_t i = 0; i < count; i += kBlockScaledTile) {
        const size_t n = count - i < kBlockScaledTile ? count - i : kBlockScaledTile;
        load_floats<In>(x + i, n, tile);
        const uint32_t tile_max = block_scaled_avx2::tensor_max_bits(tile, n);
        amax = tile_max > amax ? tile_max : amax;
      }
      return bits_float(amax);
    }
  }
#endif
  return block_scaled_tensor_max_generic<In>(x, count);
}

// Runs `simd(begin, end)` (returns where it stopped: end, or a group it left) and the generic
// `range(begin, end)` (returns its first non-finite block, or end) over [0, blocks): the SIMD
// kernel over the first simd_blocks, the generic loop over each group it leaves and the rest.
// Returns the first non-finite block, or blocks.
template <typename Simd, typename Range>
inline size_t block_scaled_encode_split(size_t blocks, size_t simd_blocks, const Simd& simd,
                                        const Range& range) {
  size_t first_bad = blocks;
  size_t begin = 0;
  while (begin < simd_blocks) {
    begin = simd(begin, simd_blocks);
    if (begin == simd_blocks) break;
    const size_t bad = range(begin, begin + 8);
    if (bad < begin + 8 && first_bad == blocks) first_bad = bad;
    begin += 8;
  }
  const size_t bad = range(begin, blocks);
  if (bad < blocks && first_bad == blocks) first_bad = bad;
  return first_bad;
}

// mxfp8/mxfp4 encode; returns the first block whose input is not finite, or the block count.
template <typename In, typename F, bool kStochastic>
size_t mx_encode_cpu(const typename In::Storage* input, size_t count, uint64_t seed,
                     uint8_t* payload, float* error) {
  const BlockScaledLayout layout = block_scaled_layout(count, kMxBlock, F::kBits);
  const auto range = [&](size_t begin, size_t end) {
    return mx_encode_range<In, F, kStochastic>(input, count, seed, begin, end, payload, error);
  };
  const auto simd = [&](size_t begin, size_t end) -> size_t {
#if TERSE_BLOCK_SCALED_AVX2
    const RoundingKey key = rounding_key(seed);
    uint8_t* codes = payload + layout.codes;
    const bool avx512 = block_scaled_avx512::available();
    return block_scaled_encode_tiles<In, kMxBlock>(
        input, begin, end, [&](const float* x, size_t b, size_t e) {
          if (avx512) {
            return error != nullptr ? block_scaled_avx512::mx_encode<F, kStochastic, true>(
                                          x, b, e, key, payload, codes, error)
                                    : block_scaled_avx512::mx_encode<F, kStochastic, false>(
                                          x, b, e, key, payload, codes, error);
          }
          return error != nullptr ? block_scaled_avx2::mx_encode<F, kStochastic, true>(
                                        x, b, e, key, payload, codes, error)
                                  : block_scaled_avx2::mx_encode<F, kStochastic, false>(
                                        x, b, e, key, payload, codes, error);
        });
#else
    (void)begin;
    return end;
#endif
  };
  return block_scaled_encode_split(layout.blocks, block_scaled_simd_blocks(count, kMxBlock), simd,
                                   range);
}

// nvfp4 encode (the tensor scale already computed and finite, or NaN: then every block is
// marked); returns the first block whose input is not finite, or the block count.
template <typename In, bool kStochastic>
size_t nv_encode_cpu(const typename In::Storage* input, size_t count, float tensor_scale,
                     uint64_t seed, uint8_t* payload, float* error) {
  const BlockScaledLayout layout = block_scaled_layout(count, kNvBlock, E2M1::kBits);
  const auto range = [&](size_t begin, size_t end) {
    return nv_encode_range<In, kStochastic>(input, count, tensor_scale, seed, begin, end, payload,
                                            error);
  };
  const auto simd = [&](size_t begin, size_t end) -> size_t {
#if TERSE_BLOCK_SCALED_AVX2
    const RoundingKey key = rounding_key(seed);
    uint8_t* codes = payload + layout.codes;
    const bool avx512 = block_scaled_avx512::available();
    return block_scaled_encode_tiles<In, kNvBlock>(
        input, begin, end, [&](const float* x, size_t b, size_t e) {
          if (avx512) {
            return error != nullptr ? block_scaled_avx512::nv_encode<kStochastic, true>(
                                          x, b, e, tensor_scale, key, payload, codes, error)
                                    : block_scaled_avx512::nv_encode<kStochastic, false>(
                                          x, b, e, tensor_scale, key, payload, codes, error);
          }
          return error != nullptr ? block_scaled_avx2::nv_encode<kStochastic, true>(
                                        x, b, e, tensor_scale, key, payload, codes, error)
                                  : block_scaled_avx2::nv_encode<kStochastic, false>(
                                        x, b, e, tensor_scale, key, payload, codes, error);
        });
#else
    (void)begin;
    return end;
#endif
  };
  const size_t simd_blocks =
      block_scaled_is_finite(tensor_scale) ? block_scaled_simd_blocks(count, kNvBlock) : 0;
  return block_scaled_encode_split(layout.blocks, simd_blocks, simd, range);
}

template <typename Out, typename F, bool kAccumulate>
void mx_decode_cpu(const uint8_t* payload, size_t count, typename Out::Storage* output) {
  const size_t begin = block_scaled_simd_blocks(count, kMxBlock);
#if TERSE_BLOCK_SCALED_AVX2
  const uint8_t* codes = payload + block_scaled_layout(count, kMxBlock, F::kBits).codes;
  block_scaled_decode_tiles<Out, kMxBlock, kAccumulate>(
      begin, output, [&](float* out, size_t b, size_t e, auto accumulate) {
        block_scaled_avx2::mx_decode<F, decltype(accumulate)::value>(payload, codes, b, e, out);
      });
#endif
  mx_decode_range<Out, F, kAccumulate>(payload, count, begin, output);
}

template <typename Out, bool kAccumulate>
void nv_decode_cpu(const uint8_t* payload, size_t count, float tensor_scale,
                   typename Out::Storage* output) {
  const size_t begin = block_scaled_simd_blocks(count, kNvBlock);
#if TERSE_BLOCK_SCALED_AVX2
  const uint8_t* codes = payload + block_scaled_layout(count, kNvBlock, E2M1::kBits).codes;
  block_scaled_decode_tiles<Out, kNvBlock, kAccumulate>(
      begin, output, [&](float* out, size_t b, size_t e, auto accumulate) {
        block_scaled_avx2::nv_decode<decltype(accumulate)::value>(payload, codes, b, e,
                                                                  tensor_scale, out);
      });
#endif
  nv_decode_range<Out, kAccumulate>(payload, count, tensor_scale, begin, output);
}

}  // namespace terse
