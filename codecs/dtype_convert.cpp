#include "codecs/dtype_convert.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/host_device.h"

#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(TERSE_NO_CLONES)
#define TERSE_CONVERT_AVX2 1
#include <immintrin.h>
#define TERSE_F16C __attribute__((target("avx2,f16c")))
#else
#define TERSE_CONVERT_AVX2 0
#endif

namespace terse {
namespace {

// ---- The per-element definitions (dtype.h), also the fallback without AVX2 and F16C.

template <typename Out, bool kSaturate, bool kAccumulate>
inline typename Out::Storage store_one(float value, typename Out::Storage old) {
  if (kSaturate) value = saturate_to<Out>(value);
  if (kAccumulate) value = value + Out::load(old);
  return Out::store(value);
}

template <typename In>
TERSE_CPU_DISPATCH void load_each(const typename In::Storage* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = In::load(in[i]);
}

template <typename Out, bool kSaturate, bool kAccumulate>
TERSE_CPU_DISPATCH void store_each(const float* values, size_t n, typename Out::Storage* out) {
  for (size_t i = 0; i < n; ++i) out[i] = store_one<Out, kSaturate, kAccumulate>(values[i], out[i]);
}

// fp8: one load from a table of the 256 values fp8_to_float gives (NaNs included, so the table is
// the definition itself).
template <typename F>
struct Fp8Table {
  float value[256];
  Fp8Table() {
    for (uint32_t code = 0; code < 256; ++code) value[code] = fp8_to_float<F>(code);
  }
};

template <typename F>
void load_fp8_each(const uint8_t* in, size_t n, float* out) {
  static const Fp8Table<F> table;
  for (size_t i = 0; i < n; ++i) out[i] = table.value[in[i]];
}

#if TERSE_CONVERT_AVX2

bool has_avx2_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// ---- 8 lanes at a time. A vector whose input (load) or result (store) holds a NaN goes through
// the per-element code instead: NaNs are rare, and the per-element code is their definition.
// (16-lane AVX-512 versions measured no faster in the codecs: the conversion is a small part of a
// tile's work.)

TERSE_F16C void load_halves(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    if (_mm_movemask_epi8(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00))) != 0) {
      for (size_t j = i; j < i + 8; ++j) out[j] = half_to_float(in[j]);
      continue;
    }
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

TERSE_F16C void load_bf16s(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

// values[i..i+7] clamped and accumulated as store_one does, or false when a lane is NaN.
template <typename Out, bool kSaturate, bool kAccumulate>
TERSE_F16C bool lanes_to_store(const float* values, const uint16_t* old, __m256* v) {
  *v = _mm256_loadu_ps(values);
  if (kSaturate) {
    // saturate_to's value > limit ? limit : (value < -limit ? -limit : value): vminps and vmaxps
    // return their second operand when the comparison is false, a NaN included.
    const float limit = Out::kType == DType::kFloat16 ? 65504.0f : 3.38953139e38f;
    *v = _mm256_max_ps(_mm256_set1_ps(-limit), _mm256_min_ps(_mm256_set1_ps(limit), *v));
  }
  if (kAccumulate) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(old));
    // A signalling NaN here, quieted by vcvtph2ps, makes a NaN sum either way: a NaN lane.
    const __m256 previous =
        Out::kType == DType::kFloat16
            ? _mm256_cvtph_ps(h)
            : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    *v = _mm256_add_ps(*v, previous);
  }
  return _mm256_movemask_ps(_mm256_cmp_ps(*v, *v, _CMP_UNORD_Q)) == 0;
}

template <bool kSaturate, bool kAccumulate>
TERSE_F16C void store_halves(const float* values, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v;
    if (!lanes_to_store<F16, kSaturate, kAccumulate>(values + i, out + i, &v)) {
      for (size_t j = i; j < i + 8; ++j) {
        out[j] = store_one<F16, kSaturate, kAccumulate>(values[j], out[j]);
      }
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = store_one<F16, kSaturate, kAccumulate>(values[i], out[i]);
}

template <bool kSaturate, bool kAccumulate>
TERSE_F16C void store_bf16s(const float* values, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v;
    if (!lanes_to_store<BF16, kSaturate, kAccumulate>(values + i, out + i, &v)) {
      for (size_t j = i; j < i + 8; ++j) {
        out[j] = store_one<BF16, kSaturate, kAccumulate>(values[j], out[j]);
      }
      continue;
    }
    // float_to_bf16 on a number: (bits + 0x7fff + bit 16) >> 16, ties to even.
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
    // Lanes < 2^16: packus keeps them; it packs within 128-bit halves, the permute restores order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = store_one<BF16, kSaturate, kAccumulate>(values[i], out[i]);
}

// fp8 in 8 lanes: fp8_to_float's arithmetic (minifloat_value for numbers, the sign with infinity or
// the quiet NaN for the rest). A table lookup per element ran at a quarter of this; a gather from
// the table, slower still.
template <typename F>
TERSE_F16C void load_fp8s(const uint8_t* in, size_t n, float* out) {
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7f);
  const __m256i rebias = _mm256_set1_epi32((127 - F::kBias) << 23);
  // A subnormal code m stands for m * 2^(kMinExponent - kMantissaBits): exact as a float product.
  const __m256 quantum = _mm256_set1_ps(
      bits_float(static_cast<uint32_t>(127 + F::kMinExponent - F::kMantissaBits) << 23));
  const uint32_t special = F::kInfinityCode != F::kNanCode ? 0x7f800000u : 0x7fc00000u;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i code =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    const __m256i magnitude = _mm256_and_si256(code, magnitude_mask);
    const __m256i normal =
        _mm256_add_epi32(_mm256_slli_epi32(magnitude, 23 - F::kMantissaBits), rebias);
    const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), quantum);
    const __m256i is_subnormal =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(1 << F::kMantissaBits), magnitude);
    __m256i bits = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(normal), subnormal,
                                                        _mm256_castsi256_ps(is_subnormal)));
    // Not numbers: the infinity code (E5M2) and the NaN codes above it.
    const __m256i not_number =
        _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(static_cast<int>(F::kFirstSpecial) - 1));
    const __m256i nan =
        _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(static_cast<int>(F::kInfinityCode)));
    const __m256i special_bits = _mm256_blendv_epi8(_mm256_set1_epi32(static_cast<int>(special)),
                                                    _mm256_set1_epi32(0x7fc00000), nan);
    bits = _mm256_blendv_epi8(bits, special_bits, not_number);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(0x80)), 24);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_or_si256(bits, sign));
  }
  load_fp8_each<F>(in + i, n - i, out + i);
}

#endif  // TERSE_CONVERT_AVX2

}  // namespace

template <>
void load_floats<F32>(const float* in, size_t n, float* out) {
  memcpy(out, in, n * sizeof(float));
}

template <>
void load_floats<F16>(const uint16_t* in, size_t n, float* out) {
#if TERSE_CONVERT_AVX2
  if (has_avx2_f16c()) return load_halves(in, n, out);
#endif
  load_each<F16>(in, n, out);
}

template <>
void load_floats<BF16>(const uint16_t* in, size_t n, float* out) {
#if TERSE_CONVERT_AVX2
  if (has_avx2_f16c()) return load_bf16s(in, n, out);
#endif
  load_each<BF16>(in, n, out);
}

template <>
void load_floats<F8E4M3>(const uint8_t* in, size_t n, float* out) {
#if TERSE_CONVERT_AVX2
  if (has_avx2_f16c()) return load_fp8s<E4M3>(in, n, out);
#endif
  load_fp8_each<E4M3>(in, n, out);
}

template <>
void load_floats<F8E5M2>(const uint8_t* in, size_t n, float* out) {
#if TERSE_CONVERT_AVX2
  if (has_avx2_f16c()) return load_fp8s<E5M2>(in, n, out);
#endif
  load_fp8_each<E5M2>(in, n, out);
}

template <typename Out, bool kSaturate, bool kAccumulate>
void store_floats(const float* values, size_t n, typename Out::Storage* out) {
#if TERSE_CONVERT_AVX2
  if constexpr (std::is_same<Out, F16>::value) {
    if (has_avx2_f16c()) return store_halves<kSaturate, kAccumulate>(values, n, out);
  } else if constexpr (std::is_same<Out, BF16>::value) {
    if (has_avx2_f16c()) return store_bf16s<kSaturate, kAccumulate>(values, n, out);
  }
#endif
  store_each<Out, kSaturate, kAccumulate>(values, n, out);
}

#define TERSE_STORE_FLOATS(Out)                                                       \
  template void store_floats<Out, false, false>(const float*, size_t, Out::Storage*); \
  template void store_floats<Out, false, true>(const float*, size_t, Out::Storage*);  \
  template void store_floats<Out, true, false>(const float*, size_t, Out::Storage*);  \
  template void store_floats<Out, true, true>(const float*, size_t, Out::Storage*);
TERSE_STORE_FLOATS(F32)
TERSE_STORE_FLOATS(F16)
TERSE_STORE_FLOATS(BF16)
TERSE_STORE_FLOATS(F8E4M3)
TERSE_STORE_FLOATS(F8E5M2)
#undef TERSE_STORE_FLOATS

}  // namespace terse
