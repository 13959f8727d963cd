// CPU loops of the low-bit quantizers (sign, terngrad, qsgd): encode, validate and decode the
// payload of scaled_codes.h for a quantizer policy `Math`. Runtime ISA dispatch
// (TERSE_CPU_DISPATCH) picks the AVX-512 or AVX2 clone. Within a tile, the chunks that share a
// block are packed by a branch-free loop nest of independent lanes (see bit_packing.h), which GCC
// vectorises (-fopt-info-vec; ymm code in the x86-64-v3 clones).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codecs/bit_packing.h"
#include "codecs/block_stats.h"
#include "codecs/dtype.h"
#include "codecs/rounding_random.h"
#include "codecs/scaled_codes.h"
#include "common/host_device.h"

namespace terse {

// The block being walked: its coder and where it ends. Returned by value from the helpers below
// (rather than captured by reference in a lambda) so that it stays in registers and the stores of
// the hot loops cannot alias it, which would stop their vectorisation.
template <typename Math>
struct BlockCursor {
  typename Math::Coder coder;
  size_t end;
};

// Encoder side: computes the scale of the block holding element `i`, stores it, and returns the
// block's coder.
template <typename In, typename Math>
inline BlockCursor<Math> enter_encode_block(const Math& math, const typename In::Storage* input,
                                            size_t count, uint32_t block, size_t i,
                                            uint8_t* scales) {
  const size_t index = i / block;
  const size_t start = index * block;
  const size_t n = count - start < block ? count - start : block;
  const BlockStats stats = block_stats_cpu<In, Math::kStats>(input + start, n);
  const float scale = math.scale(stats, static_cast<uint32_t>(n));
  memcpy(scales + index * sizeof(float), &scale, sizeof(float));
  return BlockCursor<Math>{math.coder(scale), start + n};
}

// Decoder side: reads the scale of the block holding element `i`.
template <typename Math>
inline BlockCursor<Math> enter_decode_block(const Math& math, const uint8_t* scales, size_t count,
                                            uint32_t block, size_t i) {
  const size_t index = i / block;
  const size_t start = index * block;
  float scale;
  memcpy(&scale, scales + index * sizeof(float), sizeof(float));
  return BlockCursor<Math>{math.coder(scale), count - start < block ? count : start + block};
}

// The chunk of a full tile starting at `tile_start` where the block ending at `block_end` stops
// (the tile's chunk count when the block covers the rest of the tile). Blocks are multiples of 8
// elements, so a block boundary inside a tile is a chunk boundary.
template <typename Tile>
inline int chunk_run_end(size_t block_end, size_t tile_start) {
  const size_t chunks = (block_end - tile_start) / Tile::kLanes;
  return chunks < size_t(Tile::kChunks) ? int(chunks) : Tile::kChunks;
}

// Encodes `count` elements: writes the block scales (fp32, possibly unaligned) and the packed
// codes, and `error[i] = x[i] - decoded[i]` when kWithError. Each block's scale is computed just
// before its first chunk is packed, so the block is still in L1/L2 for the packing pass.
template <typename In, typename Math, bool kWithError>
TERSE_CPU_DISPATCH void scaled_codes_encode_cpu(
    const Math math, const typename In::Storage* __restrict input, size_t count, uint32_t block,
    uint64_t seed, uint8_t* __restrict scales, uint8_t* __restrict codes, float* __restrict error) {
  using Tile = PackedTile<Math::kBits>;
  const RoundingKey key = rounding_key(seed);
  BlockCursor<Math> cursor{math.coder(0.0f), 0};
  const size_t full_tiles = count / Tile::kTileElements;
  for (size_t tile = 0; tile < full_tiles; ++tile) {
    const size_t tile_start = tile * Tile::kTileElements;
    // A tile never straddles a multiple of 2^32, so the high half of the index is per tile and
    // the per-element index math stays 32-bit.
    const uint32_t index_low = static_cast<uint32_t>(tile_start);
    const uint32_t index_high = static_cast<uint32_t>(tile_start >> 32);
    uint32_t words[Tile::kLanes] = {};
    // Runs of chunks that share one block, so the inner loops carry no branch.
    for (int c = 0; c < Tile::kChunks;) {
      const size_t base = tile_start + size_t(c) * Tile::kLanes;
      if (base >= cursor.end) {
        cursor = enter_encode_block<In, Math>(math, input, count, block, base, scales);
      }
      const int run_end = chunk_run_end<Tile>(cursor.end, tile_start);
      const typename Math::Coder coder = cursor.coder;
      for (; c < run_end; ++c) {
        for (int j = 0; j < Tile::kLanes; ++j) {
          const size_t i = tile_start + size_t(c) * Tile::kLanes + j;
          const float x = In::load(input[i]);
          const float uniform =
              Math::kStochastic
                  ? rounding_uniform(key, index_low + uint32_t(c * Tile::kLanes + j), index_high)
                  : 0.0f;
          const uint32_t code = math.encode(coder, x, uniform);
          words[j] |= code << (c * Math::kBits);
          if (kWithError) error[i] = x - math.decode(coder, code);
        }
      }
    }
    memcpy(codes + tile * Tile::kTileBytes, words, sizeof(words));
  }

  // The tail, linearly packed (fewer than one tile of elements).
  const size_t tail_start = full_tiles * Tile::kTileElements;
  uint8_t* tail = codes + full_tiles * Tile::kTileBytes;
  memset(tail, 0, packed_code_bytes(count - tail_start, Math::kBits));
  for (size_t i = tail_start; i < count; ++i) {
    if (i >= cursor.end)
      cursor = enter_encode_block<In, Math>(math, input, count, block, i, scales);
    const float x = In::load(input[i]);
    const float uniform = Math::kStochastic ? rounding_uniform(key, uint64_t(i)) : 0.0f;
    const uint32_t code = math.encode(cursor.coder, x, uniform);
    const size_t bit = (i - tail_start) * Math::kBits;
    tail[bit / 8] = static_cast<uint8_t>(tail[bit / 8] | (code << (bit % 8)));
    if (kWithError) error[i] = x - math.decode(cursor.coder, code);
  }
}

// Decodes a validated payload into `count` elements of `output` (adding when kAccumulate).
template <typename Out, typename Math, bool kAccumulate>
TERSE_CPU_DISPATCH void scaled_codes_decode_cpu(const Math math, const uint8_t* __restrict scales,
                                                const uint8_t* __restrict codes, size_t count,
                                                uint32_t block,
                                                typename Out::Storage* __restrict output) {
  using Tile = PackedTile<Math::kBits>;
  BlockCursor<Math> cursor{math.coder(0.0f), 0};
  const size_t full_tiles = count / Tile::kTileElements;
  for (size_t tile = 0; tile < full_tiles; ++tile) {
    const size_t tile_start = tile * Tile::kTileElements;
    uint32_t words[Tile::kLanes];
    memcpy(words, codes + tile * Tile::kTileBytes, sizeof(words));
    for (int c = 0; c < Tile::kChunks;) {
      const size_t base = tile_start + size_t(c) * Tile::kLanes;
      if (base >= cursor.end) cursor = enter_decode_block(math, scales, count, block, base);
      const int run_end = chunk_run_end<Tile>(cursor.end, tile_start);
      const typename Math::Coder coder = cursor.coder;
      for (; c < run_end; ++c) {
        for (int j = 0; j < Tile::kLanes; ++j) {
          const size_t i = tile_start + size_t(c) * Tile::kLanes + j;
          const uint32_t code = (words[j] >> (c * Math::kBits)) & Tile::kCodeMask;
          float value = saturate_to<Out>(math.decode(coder, code));
          if (kAccumulate) value = value + Out::load(output[i]);
          output[i] = Out::store(value);
        }
      }
    }
  }
  const size_t tail_start = full_tiles * Tile::kTileElements;
  const uint8_t* tail = codes + full_tiles * Tile::kTileBytes;
  for (size_t i = tail_start; i < count; ++i) {
    if (i >= cursor.end) cursor = enter_decode_block(math, scales, count, block, i);
    const size_t bit = (i - tail_start) * Math::kBits;
    const uint32_t code = (uint32_t(tail[bit / 8]) >> (bit % 8)) & Tile::kCodeMask;
    float value = saturate_to<Out>(math.decode(cursor.coder, code));
    if (kAccumulate) value = value + Out::load(output[i]);
    output[i] = Out::store(value);
  }
}

// Checks every scale, every code (when the policy has invalid codes) and the padding bits.
template <typename Math>
TERSE_CPU_DISPATCH ScaledCodesDefect scaled_codes_validate_cpu(const Math math,
                                                               const uint8_t* scales, size_t blocks,
                                                               const uint8_t* codes, size_t count) {
  ScaledCodesDefect defect;
  // A branch-free pass finds whether anything is wrong; the rare failure is then located.
  bool scales_valid = true;
  for (size_t b = 0; b < blocks; ++b) {
    float scale;
    memcpy(&scale, scales + b * sizeof(float), sizeof(float));
    scales_valid &= scale_is_valid(scale);
  }
  if (!scales_valid) {
    for (size_t b = 0; b < blocks; ++b) {
      float scale;
      memcpy(&scale, scales + b * sizeof(float), sizeof(float));
      if (!scale_is_valid(scale)) {
        defect.kind = ScaledCodesDefect::kScale;
        defect.index = b;
        defect.scale = scale;
        return defect;
      }
    }
  }
  const size_t code_bytes = packed_code_bytes(count, Math::kBits);
  if (math.checks_codes()) {
    bool codes_valid = true;
    for (size_t k = 0; k < code_bytes; ++k) codes_valid &= math.byte_valid(codes[k]);
    if (!codes_valid) {
      for (size_t k = 0; k < code_bytes; ++k) {
        if (!math.byte_valid(codes[k])) {
          defect.kind = ScaledCodesDefect::kCode;
          defect.index = k;
          return defect;
        }
      }
    }
  }
  const uint32_t padding = packed_padding_mask(count, Math::kBits);
  if (code_bytes > 0 && (codes[code_bytes - 1] & padding) != 0) {
    defect.kind = ScaledCodesDefect::kPadding;
    defect.index = code_bytes - 1;
  }
  return defect;
}

// Host encode of any input type, with or without the error output.
template <typename Math>
void scaled_codes_encode_host(const Math& math, DType dtype, const void* input, size_t count,
                              uint32_t block, uint64_t seed, uint8_t* scales, uint8_t* codes,
                              float* error) {
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    const auto* typed = static_cast<const typename In::Storage*>(input);
    if (error != nullptr) {
      scaled_codes_encode_cpu<In, Math, true>(math, typed, count, block, seed, scales, codes,
                                              error);
    } else {
      scaled_codes_encode_cpu<In, Math, false>(math, typed, count, block, seed, scales, codes,
                                               nullptr);
    }
  });
}

// Host decode of a validated payload into any output type.
template <typename Math>
void scaled_codes_decode_host(const Math& math, const uint8_t* scales, const uint8_t* codes,
                              size_t count, uint32_t block, DType dtype, void* output,
                              bool accumulate) {
  dispatch_dtype(dtype, [&](auto out) {
    using Out = decltype(out);
    auto* typed = static_cast<typename Out::Storage*>(output);
    if (accumulate) {
      scaled_codes_decode_cpu<Out, Math, true>(math, scales, codes, count, block, typed);
    } else {
      scaled_codes_decode_cpu<Out, Math, false>(math, scales, codes, count, block, typed);
    }
  });
}

}  // namespace terse
