// Math of the blockwise integer quantizers int8/int4/int2, shared by the CPU loops
// (int_quant_codecs.cpp) and the CUDA kernels (cuda/int_quant_kernels.cu) so that both sides
// write the same bytes: the per-block parameters, the per-element quantisation, the packing of
// codes into bytes, and the checks a decoder makes on a received block.
//
// A block's codes are packed "planar": a block of r elements has s = ceil(r * bits / 8) code
// bytes, and element j sits in byte j % s at bit (j / s) * bits. Byte k therefore holds elements
// k, k + s, k + 2s, ... so packing and unpacking need no shuffles: a SIMD lane or a GPU thread per
// byte reads and writes contiguous runs.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codecs/dtype.h"
#include "common/counter_rng.h"
#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {

// Header flags of an int quantizer message (WireHeader::flags).
constexpr uint8_t kIntQuantAbsMaxFlag = 1;      // symmetric codes, no minimum on the wire
constexpr uint8_t kIntQuantStochasticFlag = 2;  // informational: decoding does not depend on it
constexpr uint8_t kIntQuantKnownFlags = kIntQuantAbsMaxFlag | kIntQuantStochasticFlag;

// Block sizes are multiples of 8 so that every block's codes end on a byte boundary for all
// three widths, and the code area of block b starts at byte b * block * bits / 8.
constexpr uint32_t kIntQuantMinBlock = 8;
constexpr uint32_t kIntQuantMaxBlock = 65536;
constexpr uint32_t kIntQuantDefaultBlock = 256;

TERSE_HD bool int_quant_block_is_valid(uint64_t block) {
  return block >= kIntQuantMinBlock && block <= kIntQuantMaxBlock && block % 8 == 0;
}

// Code values of a `kBits`-wide quantizer in either mode. Codes are stored unsigned; the value a
// stored code u stands for is (u + kLowest) * scale + base.
template <int kBits, bool kAbsMax>
struct IntQuantCodes {
  static_assert(kBits == 2 || kBits == 4 || kBits == 8, "int quantizers are 2, 4 or 8 bits");
  static constexpr int kPerByte = 8 / kBits;
  static constexpr uint32_t kMask = (1u << kBits) - 1;
  // minmax: codes 0 .. 2^bits - 1 above the block minimum. absmax: symmetric codes
  // -(2^(bits-1) - 1) .. +(2^(bits-1) - 1) around zero (int2 is ternary), stored shifted up.
  static constexpr int kLowest = kAbsMax ? -((1 << (kBits - 1)) - 1) : 0;
  static constexpr int kHighest = kAbsMax ? (1 << (kBits - 1)) - 1 : (1 << kBits) - 1;
  // absmax leaves the top stored code (2^bits - 1) unused; a received message may still hold it,
  // and it decodes as the top used one, so every stored code decodes within [kLowest, kHighest].
  static constexpr uint32_t kTopStored = static_cast<uint32_t>(kHighest - kLowest);
};

// Code bytes of a block of `elements` elements.
TERSE_HD size_t int_quant_code_bytes(size_t elements, int bits) {
  return (elements * static_cast<size_t>(bits) + 7) / 8;
}

TERSE_HD size_t int_quant_block_count(size_t count, uint32_t block) {
  return (count + block - 1) / block;
}

// Where things are in the payload after the header: an fp32 scale per block, an fp32 minimum
// per block (minmax only), then the codes of all blocks in order.
struct IntQuantLayout {
  size_t blocks;
  size_t minimums;  // byte offset of the minimums (minmax)
  size_t codes;     // byte offset of the codes
  size_t bytes;     // payload size
};

TERSE_HD IntQuantLayout int_quant_layout(size_t count, uint32_t block, int bits, bool absmax) {
  IntQuantLayout layout;
  layout.blocks = int_quant_block_count(count, block);
  layout.minimums = layout.blocks * sizeof(float);
  layout.codes = layout.minimums + (absmax ? 0 : layout.blocks * sizeof(float));
  layout.bytes = layout.codes + int_quant_code_bytes(count, bits);
  return layout;
}

// Scales and minimums may sit at any byte offset (a message inside a larger buffer), so they are
// moved with memcpy, which compiles to a plain load or store where alignment allows.
TERSE_HD float int_quant_load_float(const uint8_t* bytes) {
  float value;
  memcpy(&value, bytes, sizeof(value));
  return value;
}
TERSE_HD void int_quant_store_float(uint8_t* bytes, float value) {
  memcpy(bytes, &value, sizeof(value));
}

// Running extent of a block: minimum and maximum (minmax) or maximum magnitude (absmax, in
// `hi`), ignoring NaNs, which `nan` records instead. Min and max are order-free, so any split of
// the block (SIMD lanes, GPU threads) merges to the same result.
struct IntQuantExtent {
  float lo;
  float hi;
  bool nan;
};

template <bool kAbsMax>
TERSE_HD IntQuantExtent int_quant_empty_extent() {
  return IntQuantExtent{INFINITY, kAbsMax ? 0.0f : -INFINITY, false};
}

// `v < lo ? v : lo` keeps lo when v is NaN; written so on both sides for the same semantics.
TERSE_HD float int_quant_min(float a, float b) {
  return b < a ? b : a;
}
TERSE_HD float int_quant_max(float a, float b) {
  return b > a ? b : a;
}

template <bool kAbsMax>
TERSE_HD void int_quant_extend(IntQuantExtent* extent, float v) {
  if (kAbsMax) {
    extent->hi = int_quant_max(extent->hi, fabsf(v));
  } else {
    extent->lo = int_quant_min(extent->lo, v);
    extent->hi = int_quant_max(extent->hi, v);
  }
  extent->nan |= v != v;
}

template <bool kAbsMax>
TERSE_HD void int_quant_merge(IntQuantExtent* extent, const IntQuantExtent& other) {
  extent->lo = int_quant_min(extent->lo, other.lo);
  extent->hi = int_quant_max(extent->hi, other.hi);
  extent->nan |= other.nan;
}

TERSE_HD bool int_quant_is_finite(float v) {
  return fabsf(v) <= FLT_MAX;  // false for NaN too
}

// The next float towards zero of a positive finite `v`.
TERSE_HD float int_quant_float_below(float v) {
  return bits_float(float_bits(v) - 1u);
}

// Whether a block's (scale, base) read from a message is acceptable: finite, scale not negative
// (nor -0, which no encoder writes), and every code decodes to a finite value (the decoded
// values are monotone in the code, so the two extreme codes suffice).
template <int kBits, bool kAbsMax>
TERSE_HD bool int_quant_block_is_decodable(float scale, float base) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  if (!int_quant_is_finite(scale) || !int_quant_is_finite(base) || (float_bits(scale) >> 31)) {
    return false;
  }
  return int_quant_is_finite(fmaf(static_cast<float>(Codes::kHighest), scale, base)) &&
         int_quant_is_finite(fmaf(static_cast<float>(Codes::kLowest), scale, base));
}

// Everything known about one block once its extent is known. Encoding maps x to the code
// position q = fma(x, inv, bias) (= (x - base) * inv up to rounding, but never overflowing in
// between); decoding maps a code c to fma(c + kLowest, scale, base).
struct IntQuantBlock {
  float scale;  // on the wire; NaN marks a block whose input was not finite
  float base;   // on the wire for minmax (the block minimum); 0 for absmax
  float inv;
  float bias;
  bool finite;
};

template <int kBits, bool kAbsMax>
TERSE_HD IntQuantBlock int_quant_block(const IntQuantExtent& extent) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  IntQuantBlock block;
  block.finite =
      !extent.nan && int_quant_is_finite(extent.hi) && (kAbsMax || int_quant_is_finite(extent.lo));
  if (!block.finite) {
    // Decoders refuse a NaN scale, so a non-finite input can never decode as something else.
    block.scale = bits_float(0x7fc00000u);
    block.base = 0.0f;
    block.inv = 0.0f;
    block.bias = 0.0f;
    return block;
  }
  // Adding +0 turns a -0 extreme into +0: which zero the min of {-0, +0} returns depends on the
  // order of comparison, and the minimum goes on the wire.
  const float lo = kAbsMax ? 0.0f : extent.lo + 0.0f;
  const float hi = extent.hi + 0.0f;
  // Levels spanned by the codes: 2^bits - 1 for minmax, 2^(bits-1) - 1 on each side of zero for
  // absmax (whose "range" is then the maximum magnitude).
  const float levels = static_cast<float>(Codes::kHighest);
  float range = hi - lo;
  float scale, inv;
  if (range <= FLT_MAX) {
    scale = range / levels;
    inv = range > 0.0f ? levels / range : 0.0f;
  } else {
    // hi - lo overflowed: work with the half range, which cannot.
    const float half_range = 0.5f * hi - 0.5f * lo;
    scale = half_range / (0.5f * levels);
    inv = (0.5f * levels) / half_range;
  }
  // A range below levels * 2^-128 makes levels / range overflow: such a block is sent as its
  // minimum (every code 0, or 0 for absmax), losing at most its own sub-2^-120 range (the
  // absolute term of the error bound in the .cpp).
  if (inv > FLT_MAX) inv = 0.0f;
  // Rounding can push the top code's value just past FLT_MAX for blocks near the end of fp32's
  // range; step the scale down until every code decodes finite (a few steps at most:
  // each removes about one unit in the last place of the top value).
  for (int step = 0; step < 64 && !int_quant_block_is_decodable<kBits, kAbsMax>(scale, lo);
       ++step) {
    scale = int_quant_float_below(scale);
  }
  block.scale = scale;
  block.base = lo;
  block.inv = inv;
  // |lo| <= (2^24 + 1) * range for any two distinct floats, so |lo * inv| < 2^33: no overflow.
  block.bias = -(lo * inv);
  return block;
}

// counter_uniform(seed, index), computed so that it vectorises: the 24 random bits go through a
// 32-bit integer conversion (which SIMD has) instead of a 64-bit one (which AVX2 lacks); the value
// is the same, both conversions being exact below 2^24.
TERSE_HD float int_quant_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(static_cast<int32_t>(counter_random(seed, index) >> 40)) *
         (1.0f / 16777216.0f);
}

// Stored code of x (an element of a block whose extent was finite): round to nearest even, or
// stochastically, up with probability equal to the fractional part, using the counter RNG at the
// element's index in the tensor (so the result depends on (seed, index) only).
//
// For such a block q = fma(x, inv, bias) is finite and within a few `levels` of the code range
// (|bias| < 2^33 but q is the exact x * inv + bias rounded once, and inv is 0 where levels / range
// would overflow), so converting it to int32 is safe; the clamp happens on the integer code,
// which equals clamping q first and keeps the float part free of branches the vectoriser would
// otherwise refuse to speculate (float-to-int conversions may trap).
template <int kBits, bool kAbsMax, bool kStochastic>
TERSE_HD uint32_t int_quant_code(float x, const IntQuantBlock& block, uint64_t seed,
                                 uint64_t index) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  const float q = fmaf(x, block.inv, block.bias);
  int32_t code;
  if (kStochastic) {
    // floor(q) from the truncating conversion (GCC vectorises floorf only with
    // -fno-trapping-math); q - floor(q) is exact, and u < fraction has probability fraction (to
    // 2^-24).
    const int32_t truncated = static_cast<int32_t>(q);
    const int32_t floor_q = truncated - (static_cast<float>(truncated) > q ? 1 : 0);
    const float fraction = q - static_cast<float>(floor_q);
    code = floor_q + (int_quant_uniform(seed, index) < fraction ? 1 : 0);
  } else {
    code = static_cast<int32_t>(rintf(q));
  }
  code = code > Codes::kLowest ? code : Codes::kLowest;
  code = code < Codes::kHighest ? code : Codes::kHighest;
  return static_cast<uint32_t>(code - Codes::kLowest);
}

// Value of a code the encoder produces (at most kTopStored): one rounding (fma), no
// intermediate overflow.
template <int kBits, bool kAbsMax>
TERSE_HD float int_quant_value(uint32_t code, float scale, float base) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  return fmaf(static_cast<float>(static_cast<int32_t>(code) + Codes::kLowest), scale, base);
}

// Quantises the elements of code byte k of a block of r elements with s code bytes, starting at
// element `first` of the tensor, and returns the byte. With kGuarded, elements past r (the last
// byte of a partial block) are skipped and leave zero bits; without, the block must be full.
// When `error` (the block's slice) is not null it receives x - decoded.
template <typename In, int kBits, bool kAbsMax, bool kStochastic, bool kGuarded>
TERSE_HD uint8_t int_quant_encode_byte(const typename In::Storage* x, size_t r, size_t s, size_t k,
                                       const IntQuantBlock& block, uint64_t seed, uint64_t first,
                                       float* error) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  uint32_t byte = 0;
#if defined(__CUDACC__)
#pragma unroll
#elif defined(__GNUC__)
#pragma GCC unroll 4
#endif
  for (int p = 0; p < Codes::kPerByte; ++p) {
    const size_t j = k + p * s;
    if (kGuarded && j >= r) break;
    const float value = In::load(x[j]);
    const uint32_t code =
        int_quant_code<kBits, kAbsMax, kStochastic>(value, block, seed, first + j);
    byte |= code << (p * kBits);
    if (error != nullptr) {
      error[j] = value - int_quant_value<kBits, kAbsMax>(code, block.scale, block.base);
    }
  }
  return static_cast<uint8_t>(byte);
}

// Decodes code byte k of a block of r elements with s code bytes into the block's output slice
// (overwriting, or adding when kAccumulate).
template <typename Out, int kBits, bool kAbsMax, bool kAccumulate, bool kGuarded>
TERSE_HD void int_quant_decode_byte(uint8_t byte, size_t r, size_t s, size_t k, float scale,
                                    float base, typename Out::Storage* out) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
#if defined(__CUDACC__)
#pragma unroll
#elif defined(__GNUC__)
#pragma GCC unroll 4
#endif
  for (int p = 0; p < Codes::kPerByte; ++p) {
    const size_t j = k + p * s;
    if (kGuarded && j >= r) break;
    uint32_t code = (static_cast<uint32_t>(byte) >> (p * kBits)) & Codes::kMask;
    // Only the decoder clamps (absmax's unused top code): in the encoder the clamp would let
    // GCC split the loop on the few possible codes and give up vectorising it.
    if (kAbsMax) code -= (code + 1) >> kBits;  // the top code (all ones) to the one below
    float value = int_quant_value<kBits, kAbsMax>(code, scale, base);
    if (kAccumulate) value = Out::load(out[j]) + value;
    out[j] = Out::store(value);
  }
}

}  // namespace terse
