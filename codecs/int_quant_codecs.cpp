// The blockwise integer quantizers int8, int4 and int2 (one implementation, templated on the
// code width). The input is cut into blocks of `block` elements (the last may be shorter); each
// block gets its own fp32 scale and, in minmax mode, its own fp32 minimum.
//
// Parameters: block (multiple of 8 in [8, 65536], default 256), mode=minmax|absmax (default
// minmax), rounding=nearest|stochastic (default nearest).
//   minmax: codes 0 .. 2^bits - 1, scale = (max - min) / (2^bits - 1), x^ = min + code * scale.
//   absmax: symmetric codes -(2^(bits-1) - 1) .. 2^(bits-1) - 1 (int2 is ternary),
//           scale = max|x| / (2^(bits-1) - 1), x^ = code * scale. Half a level more error than
//           minmax for the same bits, but zero is exact and no minimum is sent.
//   nearest: round to nearest even (deterministic). stochastic: round up with probability equal
//           to the fractional part, drawn from counter_uniform(seed, element index), so the
//           result depends only on EncodeContext::seed and the data (unbiased).
//
// Wire payload after the 32-byte header (header.param0 = block, header.param1 = 0,
// header.flags = kIntQuantAbsMaxFlag | kIntQuantStochasticFlag as used, header.seed = the
// stochastic rounding seed, else 0):
//   fp32 scale[blocks]                    blocks = ceil(count / block)
//   fp32 minimum[blocks]                  minmax only
//   uint8 codes[ceil(count * bits / 8)]   block b's codes start at byte b * block * bits / 8;
//                                         a block of r elements has s = ceil(r * bits / 8)
//                                         bytes and element j is in byte j % s at bit
//                                         (j / s) * bits ("planar" packing, int_quant_math.h);
//                                         bits past the last element are zero.
// At block 256 on fp32 input: int8 (256 + 8) / 1024 = 0.258 of the input (absmax 0.254), int4
// 0.133 (0.129), int2 0.070 (0.066), plus the header.
//
// Stated error bounds, per element x of a block with M = max |x| over the block, and `scale`
// the block's scale on the wire (u = 2^-24, fp32's unit roundoff):
//   nearest:    |x - x^| <= scale / 2 + 2^-20 * M + 2^-120
//   stochastic: |x - x^| <= scale     + 2^-20 * M + 2^-120, and E[x^] = x within 2^-20 * M.
// Derivation (minmax; absmax is the same with min = 0 and fewer roundings; first order in u):
// range = max - min, inv = levels / range and scale = range / levels are rounded once each, so
// inv * scale = 1 + t with |t| <= 2u; bias = -min * inv is rounded once (u * |min| in value
// units) and q = fma(x, inv, bias) once (u * |q| * scale <= 2u * range, since |q| <= 2 levels).
// Hence |q * scale - (x - min)| <= 4u * range + u * |min|. Rounding q to a code adds at most
// scale / 2 (nearest) or under scale (stochastic; clamping only moves towards x), and the
// decoder's fma(code, scale, min) rounds once, u * |x^|. With range <= 2M and |min| <= M this is
// below 11u * M < 2^-20 * M. Stochastic rounding goes up with probability equal to the fraction
// of q to 2^-24, so E[x^] - x is within the same 2^-20 * M. Blocks whose range is below 2^-120
// (levels / range overflows, or the scale is subnormal) can lose up to their whole range: the
// absolute term. A block of identical values has range 0 and decodes exactly in minmax mode
// (code 0, x^ = min); in absmax mode only a block of zeros is exact.
//
// Non-finite input: a block holding NaN or +-Inf gets a NaN scale, zero codes, and a NaN error
// output; every decoder refuses such a message. A host encode also fails, naming the block; a
// device encode cannot say so without synchronising, so its message is refused by the receiver.
// Decoders refuse NaN/Inf, negative or -0 scales, non-finite minimums, and blocks whose largest
// code would decode beyond fp32's range, so an accepted message decodes finite. Codes themselves
// cannot be checked (every bit pattern is a code); absmax's unused top code (2^bits - 1) decodes
// as the top used one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/dtype_convert.h"
#include "codecs/int_quant_math.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/int_quant_kernels.h"
#endif

#if defined(__GNUC__)
#define TERSE_INT_QUANT_INLINE __attribute__((always_inline)) inline
#else
#define TERSE_INT_QUANT_INLINE inline
#endif

namespace terse {
namespace {

// Eight fp32 lanes as a GCC/Clang vector: each target clone lowers it to its own registers (one
// ymm on x86-64-v3, two xmm on the baseline).
typedef float Lanes8 __attribute__((vector_size(32)));

typedef uint32_t LaneBits8 __attribute__((vector_size(32)));

// Vectors are passed by pointer: by value they would make the signature depend on the clone's
// ISA (GCC's -Wpsabi warning), although these calls are always inlined.
template <typename In>
TERSE_INT_QUANT_INLINE void load_lanes8(const typename In::Storage* x, Lanes8* lanes) {
  float values[8];
  for (int j = 0; j < 8; ++j) values[j] = In::load(x[j]);
  memcpy(lanes, values, sizeof(*lanes));
}

TERSE_INT_QUANT_INLINE void splat_lanes8(float value, Lanes8* lanes) {
  *lanes = Lanes8{value, value, value, value, value, value, value, value};
}

// Extent of one block, 16 lanes at a time with explicit vectors (the vectoriser will not turn a
// running float min into SIMD without -ffast-math). Min and max are order-free, so the result
// equals the GPU's warp reduction. NaNs are caught by `poison`, which v - v makes NaN (and NaN
// stays, being sticky) for a NaN or infinite v: float-only arithmetic beside the min/max.
template <typename In, bool kAbsMax>
TERSE_INT_QUANT_INLINE IntQuantExtent block_extent(const typename In::Storage* x, size_t r) {
  const IntQuantExtent empty = int_quant_empty_extent<kAbsMax>();
  Lanes8 lo0, lo1, hi0, hi1, poison0, poison1;
  splat_lanes8(empty.lo, &lo0);
  splat_lanes8(empty.hi, &hi0);
  splat_lanes8(0.0f, &poison0);
  lo1 = lo0;
  hi1 = hi0;
  poison1 = poison0;
  const LaneBits8 magnitude_bits = {0x7fffffffu, 0x7fffffffu, 0x7fffffffu, 0x7fffffffu,
                                    0x7fffffffu, 0x7fffffffu, 0x7fffffffu, 0x7fffffffu};
  size_t i = 0;
  for (; i + 16 <= r; i += 16) {
    Lanes8 v0, v1;
    load_lanes8<In>(x + i, &v0);
    load_lanes8<In>(x + i + 8, &v1);
    poison0 += v0 - v0;
    poison1 += v1 - v1;
    if (kAbsMax) {
      // |v| by clearing the sign bit, as fabsf does (NaN included).
      v0 = (Lanes8)((LaneBits8)v0 & magnitude_bits);
      v1 = (Lanes8)((LaneBits8)v1 & magnitude_bits);
    } else {
      lo0 = v0 < lo0 ? v0 : lo0;
      lo1 = v1 < lo1 ? v1 : lo1;
    }
    hi0 = v0 > hi0 ? v0 : hi0;
    hi1 = v1 > hi1 ? v1 : hi1;
  }
  lo0 = lo1 < lo0 ? lo1 : lo0;
  hi0 = hi1 > hi0 ? hi1 : hi0;
  poison0 += poison1;
  IntQuantExtent extent = empty;
  for (int j = 0; j < 8; ++j) {
    int_quant_merge<kAbsMax>(&extent, IntQuantExtent{lo0[j], hi0[j], poison0[j] != 0.0f});
  }
  for (; i < r; ++i) int_quant_extend<kAbsMax>(&extent, In::load(x[i]));
  return extent;
}

// Full block with error output. Quantising, packing and computing the error in one loop needs
// 8/bits float loads and error stores per byte, plus the decode of each code, and GCC then
// splits the loop on the few possible codes (int2) and gives up vectorising. So a chunk of bytes
// at a time (in L1): codes per element into a staging buffer, the error from the staged codes
// (the decoder's loop), and the packing of the staged codes: three simple loops that vectorise.
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
TERSE_INT_QUANT_INLINE void encode_full_block_staged(const typename In::Storage* x, size_t s,
                                                     const IntQuantBlock& params, uint64_t seed,
                                                     uint64_t first, uint8_t* codes, float* error) {
  using Codes = IntQuantCodes<kBits, kAbsMax>;
  constexpr size_t kChunk = 256;
  uint8_t staged[Codes::kPerByte][kChunk];
  for (size_t k0 = 0; k0 < s; k0 += kChunk) {
    const size_t n = std::min(kChunk, s - k0);
    for (int p = 0; p < Codes::kPerByte; ++p) {
      const size_t offset = k0 + p * s;
      for (size_t c = 0; c < n; ++c) {
        staged[p][c] = static_cast<uint8_t>(int_quant_code<kBits, kAbsMax, kStochastic>(
            In::load(x[offset + c]), params, seed, first + offset + c));
      }
      for (size_t c = 0; c < n; ++c) {
        error[offset + c] = In::load(x[offset + c]) - int_quant_value<kBits, kAbsMax>(
                                                          staged[p][c], params.scale, params.base);
      }
    }
    for (size_t c = 0; c < n; ++c) {
      uint32_t byte = 0;
      for (int p = 0; p < Codes::kPerByte; ++p) byte |= uint32_t{staged[p][c]} << (p * kBits);
      codes[k0 + c] = static_cast<uint8_t>(byte);
    }
  }
}

// Quantises and packs one block (r elements, s code bytes). The hot loops are the full-block
// ones: without error output, one byte per iteration, vectorised across bytes.
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
TERSE_INT_QUANT_INLINE void encode_block(const typename In::Storage* x, size_t r, size_t s,
                                         bool full, const IntQuantBlock& params, uint64_t seed,
                                         uint64_t first, uint8_t* codes, float* error) {
  if (full && error == nullptr) {
    for (size_t k = 0; k < s; ++k) {
      codes[k] = int_quant_encode_byte<In, kBits, kAbsMax, kStochastic, false>(
          x, r, s, k, params, seed, first, nullptr);
    }
  } else if (full && IntQuantCodes<kBits, kAbsMax>::kPerByte == 1) {
    // int8: one element per byte, the direct loop vectorises and beats staging.
    for (size_t k = 0; k < s; ++k) {
      if (error == nullptr) __builtin_unreachable();  // no masked error stores needed
      codes[k] = int_quant_encode_byte<In, kBits, kAbsMax, kStochastic, false>(x, r, s, k, params,
                                                                               seed, first, error);
    }
  } else if (full) {
    encode_full_block_staged<In, kBits, kAbsMax, kStochastic>(x, s, params, seed, first, codes,
                                                              error);
  } else {
    for (size_t k = 0; k < s; ++k) {
      codes[k] = int_quant_encode_byte<In, kBits, kAbsMax, kStochastic, true>(x, r, s, k, params,
                                                                              seed, first, error);
    }
  }
}

// Encodes blocks [begin, end) of a tensor of `count` elements, whose elements from block begin's
// first are `input`; returns the first block whose input is not finite, or end.
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
TERSE_CPU_DISPATCH size_t int_quant_encode_blocks(const typename In::Storage* input, size_t count,
                                                  size_t begin, size_t end, uint32_t block,
                                                  uint64_t seed, uint8_t* payload, float* error) {
  const IntQuantLayout layout = int_quant_layout(count, block, kBits, kAbsMax);
  size_t first_non_finite = end;
  for (size_t b = begin; b < end; ++b) {
    const size_t first = b * block;
    const size_t r = std::min<size_t>(block, count - first);
    const size_t s = int_quant_code_bytes(r, kBits);
    const typename In::Storage* x = input + (b - begin) * block;
    const IntQuantBlock params = int_quant_block<kBits, kAbsMax>(block_extent<In, kAbsMax>(x, r));
    int_quant_store_float(payload + b * sizeof(float), params.scale);
    if (!kAbsMax) int_quant_store_float(payload + layout.minimums + b * sizeof(float), params.base);
    uint8_t* codes = payload + layout.codes + first * kBits / 8;
    float* block_error = error != nullptr ? error + first : nullptr;
    if (!params.finite) {
      memset(codes, 0, s);
      if (block_error != nullptr) std::fill(block_error, block_error + r, params.scale);
      first_non_finite = std::min(first_non_finite, b);
      continue;
    }
    encode_block<In, kBits, kAbsMax, kStochastic>(x, r, s, r == block, params, seed, first, codes,
                                                  block_error);
  }
  return first_non_finite;
}

// Elements per converted tile (whole blocks, at least one): 16 KiB of fp32, in L1.
constexpr size_t kIntQuantTile = 4096;

// Encodes every block; returns the first block whose input is not finite, or the block count.
// fp32 and bf16 tensors directly; fp16 and fp8 a tile of whole blocks at a time, converted to fp32
// by dtype_convert.h (exactly: the values In::load gives) and encoded by the fp32 loops. GCC
// vectorises the per-element conversion of bf16 (a shift) inside the loops but not fp16's or
// fp8's: fp16 went from 0.8 to 8.5 GB/s of input (16M elements), while bf16 through tiles
// measured 10% slower than the direct loop (8.6 against 9.6 GB/s; prefetching the next tile did
// not change that).
template <typename In, int kBits, bool kAbsMax, bool kStochastic>
size_t int_quant_encode_cpu(const typename In::Storage* input, size_t count, uint32_t block,
                            uint64_t seed, uint8_t* payload, float* error) {
  const size_t blocks = int_quant_block_count(count, block);
  if constexpr (std::is_same<In, F32>::value || std::is_same<In, BF16>::value) {
    return int_quant_encode_blocks<In, kBits, kAbsMax, kStochastic>(input, count, 0, blocks, block,
                                                                    seed, payload, error);
  } else {
    const size_t tile_blocks = std::max<size_t>(1, kIntQuantTile / block);
    std::vector<float> tile(std::min<size_t>(count, tile_blocks * block));
    size_t first_non_finite = blocks;
    for (size_t b = 0; b < blocks; b += tile_blocks) {
      const size_t end = std::min(blocks, b + tile_blocks);
      const size_t first = b * block;
      load_floats<In>(input + first, std::min<size_t>(count, end * block) - first, tile.data());
      const size_t bad = int_quant_encode_blocks<F32, kBits, kAbsMax, kStochastic>(
          tile.data(), count, b, end, block, seed, payload, error);
      if (bad < end) first_non_finite = std::min(first_non_finite, bad);
    }
    return first_non_finite;
  }
}

// Refuses the first block whose scale or minimum no encoder writes.
template <int kBits, bool kAbsMax>
ncclResult_t validate_blocks_cpu(const char* name, const uint8_t* payload,
                                 const IntQuantLayout& layout) {
  for (size_t b = 0; b < layout.blocks; ++b) {
    const float scale = int_quant_load_float(payload + b * sizeof(float));
    const float base =
        kAbsMax ? 0.0f : int_quant_load_float(payload + layout.minimums + b * sizeof(float));
    if (!int_quant_block_is_decodable<kBits, kAbsMax>(scale, base)) {
      return fail(ncclInvalidArgument,
                  "%s: message block %zu has scale %g and minimum %g (scales must be finite and "
                  "non-negative, and every code must decode within fp32's range)",
                  name, b, scale, base);
    }
  }
  return ncclSuccess;
}

// Decodes blocks [begin, end) into `output`, which holds their elements from block begin's
// first.
template <typename Out, int kBits, bool kAbsMax, bool kAccumulate>
TERSE_CPU_DISPATCH void int_quant_decode_blocks(const uint8_t* payload, size_t count, size_t begin,
                                                size_t end, uint32_t block,
                                                typename Out::Storage* output) {
  const IntQuantLayout layout = int_quant_layout(count, block, kBits, kAbsMax);
  for (size_t b = begin; b < end; ++b) {
    const size_t first = b * block;
    const size_t r = std::min<size_t>(block, count - first);
    const size_t s = int_quant_code_bytes(r, kBits);
    const float scale = int_quant_load_float(payload + b * sizeof(float));
    const float base =
        kAbsMax ? 0.0f : int_quant_load_float(payload + layout.minimums + b * sizeof(float));
    const uint8_t* codes = payload + layout.codes + first * kBits / 8;
    typename Out::Storage* out = output + (b - begin) * block;
    if (r == block) {
      for (size_t k = 0; k < s; ++k) {
        int_quant_decode_byte<Out, kBits, kAbsMax, kAccumulate, false>(codes[k], r, s, k, scale,
                                                                       base, out);
      }
    } else {
      for (size_t k = 0; k < s; ++k) {
        int_quant_decode_byte<Out, kBits, kAbsMax, kAccumulate, true>(codes[k], r, s, k, scale,
                                                                      base, out);
      }
    }
  }
}

// Decodes every block: into fp32 and bf16 tensors directly (see int_quant_encode_cpu: bf16's
// per-element conversion vectorises in the loop, 21 GB/s against 18.5 through a tile at 1M
// elements); into fp16 and fp8 a tile at a time, decoded as fp32 and converted by
// dtype_convert.h's store_floats (fp16: 11 to 22 GB/s): the same Out::store of the same sum
// (store_floats adds value + old where the per-element loop adds old + value: the same number,
// as a decoded value is never NaN).
template <typename Out, int kBits, bool kAbsMax, bool kAccumulate>
void int_quant_decode_cpu(const uint8_t* payload, size_t count, uint32_t block,
                          typename Out::Storage* output) {
  const size_t blocks = int_quant_block_count(count, block);
  if constexpr (std::is_same<Out, F32>::value || std::is_same<Out, BF16>::value) {
    int_quant_decode_blocks<Out, kBits, kAbsMax, kAccumulate>(payload, count, 0, blocks, block,
                                                              output);
  } else {
    const size_t tile_blocks = std::max<size_t>(1, kIntQuantTile / block);
    std::vector<float> tile(std::min<size_t>(count, tile_blocks * block));
    for (size_t b = 0; b < blocks; b += tile_blocks) {
      const size_t end = std::min(blocks, b + tile_blocks);
      const size_t first = b * block;
      int_quant_decode_blocks<F32, kBits, kAbsMax, false>(payload, count, b, end, block,
                                                          tile.data());
      store_floats<Out, false, kAccumulate>(
          tile.data(), std::min<size_t>(count, end * block) - first, output + first);
    }
  }
}

// Calls fn(std::true_type{}) or fn(std::false_type{}): runtime flags to template parameters.
template <typename Fn>
auto dispatch_bool(bool value, Fn&& fn) {
  return value ? fn(std::true_type{}) : fn(std::false_type{});
}

template <int kBits>
class IntQuantCodec final : public Codec {
 public:
  IntQuantCodec(uint32_t block, bool absmax, bool stochastic)
      : block_(block), absmax_(absmax), stochastic_(stochastic) {}

  static const char* codec_name() { return kBits == 8 ? "int8" : kBits == 4 ? "int4" : "int2"; }

  CodecId id() const override {
    return kBits == 8 ? CodecId::kInt8 : kBits == 4 ? CodecId::kInt4 : CodecId::kInt2;
  }
  bool unbiased() const override { return stochastic_; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  std::string spec() const override {
    return std::string(codec_name()) + ":block=" + std::to_string(block_) +
           ",mode=" + (absmax_ ? "absmax" : "minmax") +
           ",rounding=" + (stochastic_ ? "stochastic" : "nearest");
  }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    return kWireHeaderBytes + int_quant_layout(count, block_, kBits, absmax_).bytes;
  }

  // Not linear: each rank's blocks have their own scale (and minimum), so codes of two ranks
  // do not add. The size depends on the count alone.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // The stated bounds above, with the block's step (max - min) / (2^b - 1) <= 2 max|x| / (2^b - 1)
  // (minmax) or max|x| / (2^(b-1) - 1) (absmax): half a step (nearest) or a whole one
  // (stochastic), plus 2^-20 max|x| of fp32 rounding; 2^-120 is the absolute term.
  ErrorBound error_bound(size_t) const override {
    const double step = absmax_ ? 1.0 / ((1 << (kBits - 1)) - 1) : 2.0 / ((1 << kBits) - 1);
    return ErrorBound::stated_as((stochastic_ ? step : step / 2) + std::ldexp(1.0, -20));
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    const char* name = codec_name();
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", name);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", name);
    if (message_bytes == nullptr) {
      return fail(ncclInvalidArgument, "%s: message_bytes is null", name);
    }
    const size_t bytes = max_finite_bytes(count, dtype);
    TERSE_CHECK(check_capacity(name, bytes, capacity));
    WireHeader header = make_header(id(), dtype, count);
    header.param0 = block_;
    header.flags =
        (absmax_ ? kIntQuantAbsMaxFlag : 0) | (stochastic_ ? kIntQuantStochasticFlag : 0);
    header.seed = stochastic_ ? context.seed : 0;
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(launch_int_quant_encode(kBits, absmax_, stochastic_, dtype, input, count, block_,
                                          header.seed, payload, context.error, context.stream));
#endif
      *message_bytes = bytes;
      return ncclSuccess;
    }
    write_header(message, header);
    const size_t blocks = int_quant_block_count(count, block_);
    const size_t first_non_finite = dispatch_dtype(dtype, [&](auto in) {
      using In = decltype(in);
      return dispatch_bool(absmax_, [&](auto absmax) {
        return dispatch_bool(stochastic_, [&](auto stochastic) {
          return int_quant_encode_cpu<In, kBits, decltype(absmax)::value,
                                      decltype(stochastic)::value>(
              static_cast<const typename In::Storage*>(input), count, block_, header.seed, payload,
              context.error);
        });
      });
    });
    *message_bytes = bytes;
    if (first_non_finite < blocks) {
      const size_t first = first_non_finite * block_;
      return fail(ncclInvalidArgument,
                  "%s: input block %zu (elements %zu..%zu) holds a NaN or infinity, which the "
                  "codec cannot represent",
                  name, first_non_finite, first, std::min<size_t>(first + block_, count) - 1);
    }
    return ncclSuccess;
  }

  // On the device, error feedback and encode are one kernel (launch_int_quant_encode_compensated);
  // on the host the generic compensate-then-encode runs (the same bytes either way).
  bool fuses_device_compensation() const override {
    return TERSE_HAVE_CUDA != 0;
  }

  ncclResult_t encode_compensated_finite(const void* input, DType dtype, float* residual,
                                         size_t count, const EncodeContext& context, void* message,
                                         size_t capacity, size_t* message_bytes,
                                         bool* finite) override {
    const char* name = codec_name();
    *finite = true;
    if (context.memory != Memory::kDevice) {
      return fail(ncclInternalError, "%s: the fused compensated encode is the device's", name);
    }
    if (message == nullptr || message_bytes == nullptr) {
      return fail(ncclInvalidArgument, "%s: message or message_bytes is null", name);
    }
    const size_t bytes = max_finite_bytes(count, DType::kFloat32);
    TERSE_CHECK(check_capacity(name, bytes, capacity));
    // The header of encode(v, count, fp32): v is what the message describes.
    [[maybe_unused]] WireHeader header = make_header(id(), DType::kFloat32, count);
    header.param0 = block_;
    header.flags =
        (absmax_ ? kIntQuantAbsMaxFlag : 0) | (stochastic_ ? kIntQuantStochasticFlag : 0);
    header.seed = stochastic_ ? context.seed : 0;
    TERSE_CHECK(require_cuda(name));
#if TERSE_HAVE_CUDA
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    TERSE_CHECK(write_header_device(message, header, context.stream));
    TERSE_CHECK(launch_int_quant_encode_compensated(kBits, absmax_, stochastic_, dtype, input,
                                                    residual, count, block_, header.seed, payload,
                                                    context.stream));
#else
    (void)input;
    (void)dtype;
    (void)residual;
#endif
    *message_bytes = bytes;
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    const char* name = codec_name();
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, id(), count, context, &header));
    if ((header.flags & ~kIntQuantKnownFlags) != 0) {
      return fail(ncclInvalidArgument, "%s: message flags 0x%02x hold unknown bits", name,
                  header.flags);
    }
    if (!int_quant_block_is_valid(header.param0)) {
      return fail(ncclInvalidArgument, "%s: message block=%u is not a multiple of 8 in [%u, %u]",
                  name, header.param0, kIntQuantMinBlock, kIntQuantMaxBlock);
    }
    if (header.param1 != 0) {
      return fail(ncclInvalidArgument, "%s: message param1=%u is not 0", name, header.param1);
    }
    const uint32_t block = header.param0;
    const bool absmax = (header.flags & kIntQuantAbsMaxFlag) != 0;
    const IntQuantLayout layout = int_quant_layout(count, block, kBits, absmax);
    TERSE_CHECK(check_payload(name, kWireHeaderBytes + layout.bytes, message_bytes));
    if (count > 0 && output == nullptr) {
      return fail(ncclInvalidArgument, "%s: output is null", name);
    }
    const uint8_t* payload = static_cast<const uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name));
#if TERSE_HAVE_CUDA
      if (count == 0) return ncclSuccess;
      if (context.host_message != nullptr) {
        const uint8_t* host_payload =
            static_cast<const uint8_t*>(context.host_message) + kWireHeaderBytes;
        TERSE_CHECK(dispatch_bool(absmax, [&](auto absmax_type) {
          return validate_blocks_cpu<kBits, decltype(absmax_type)::value>(name, host_payload,
                                                                          layout);
        }));
        return launch_int_quant_decode(kBits, absmax, payload, count, block, dtype, output,
                                       accumulate, context.stream);
      }
      size_t first_invalid = 0;
      float scale = 0.0f, base = 0.0f;
      TERSE_CHECK(launch_int_quant_validate(kBits, absmax, payload, count, block, context.stream,
                                            &first_invalid, &scale, &base));
      if (first_invalid < layout.blocks) {
        return fail(ncclInvalidArgument,
                    "%s: message block %zu has scale %g and minimum %g (scales must be finite "
                    "and non-negative, and every code must decode within fp32's range)",
                    name, first_invalid, scale, base);
      }
      return launch_int_quant_decode(kBits, absmax, payload, count, block, dtype, output,
                                     accumulate, context.stream);
#endif
    }
    TERSE_CHECK(dispatch_bool(absmax, [&](auto absmax_type) {
      return validate_blocks_cpu<kBits, decltype(absmax_type)::value>(name, payload, layout);
    }));
    dispatch_dtype(dtype, [&](auto out) {
      using Out = decltype(out);
      dispatch_bool(absmax, [&](auto absmax_type) {
        dispatch_bool(accumulate, [&](auto accumulate_type) {
          int_quant_decode_cpu<Out, kBits, decltype(absmax_type)::value,
                               decltype(accumulate_type)::value>(
              payload, count, block, static_cast<typename Out::Storage*>(output));
        });
      });
    });
    return ncclSuccess;
  }

 private:
  uint32_t block_;
  bool absmax_;
  bool stochastic_;
};

template <int kBits>
ncclResult_t create_int_quant_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  const char* name = IntQuantCodec<kBits>::codec_name();
  long long block = 0;
  std::string mode, rounding;
  TERSE_CHECK(
      params.get_int("block", kIntQuantDefaultBlock, kIntQuantMinBlock, kIntQuantMaxBlock, &block));
  if (!int_quant_block_is_valid(static_cast<uint64_t>(block))) {
    return fail(ncclInvalidArgument,
                "codec %s: parameter block=%lld is not a multiple of 8 (blocks must end on a "
                "byte boundary of the packed codes)",
                name, block);
  }
  TERSE_CHECK(params.get_choice("mode", {"minmax", "absmax"}, "minmax", &mode));
  TERSE_CHECK(params.get_choice("rounding", {"nearest", "stochastic"}, "nearest", &rounding));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<IntQuantCodec<kBits>>(static_cast<uint32_t>(block), mode == "absmax",
                                                  rounding == "stochastic");
  return ncclSuccess;
}

}  // namespace

ncclResult_t create_int8_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_int_quant_codec<8>(params, codec);
}

ncclResult_t create_int4_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_int_quant_codec<4>(params, codec);
}

ncclResult_t create_int2_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_int_quant_codec<2>(params, codec);
}

}  // namespace terse
