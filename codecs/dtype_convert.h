// Bulk conversions between a tensor's element type and fp32, for the CPU paths of codecs that
// run their fp32 kernels on fp16, bf16 and fp8 tensors: they convert a tile of the input (a few
// KiB, in L1) with load_floats, encode it as fp32, and decode into an fp32 tile that
// store_floats converts into the output.
//
// Why: the codecs' generic loops convert per element through dtype.h's In::load / Out::store,
// written with selects so that GCC vectorises them, but the loops around them (block maxima,
// packing) then leave the SIMD kernels for generic code, at a fraction of the fp32 speed. A
// tile converted once feeds the same kernels as an fp32 tensor.
//
// Every function is bit-identical to the per-element code, NaN payloads included: fp16 through
// F16C (vcvtph2ps is exact; vcvtps2ph with round-to-nearest-even rounds as float_to_half does),
// with the vectors that hold a NaN left to the per-element code (F16C quiets a signalling NaN,
// and float_to_half writes its canonical NaN); bf16 as a shift and float_to_bf16's integer
// rounding in vector lanes; fp8 reads as fp8_to_float's arithmetic in vector lanes (fp8 writes
// stay per element). AVX2 and F16C are checked at run time; without them the per-element code
// runs (for fp8 reads, a table of its 256 values). tests/codecs/test_dtype_convert.cpp checks
// every fp16, bf16 and fp8 pattern.
#pragma once

#include <cstddef>

#include "codecs/dtype.h"

namespace terse {

// out[i] = In::load(in[i]) for i < n.
template <typename In>
void load_floats(const typename In::Storage* in, size_t n, float* out);

// out[i] = Out::store(v) for i < n, where v is values[i], clamped by saturate_to<Out> when
// kSaturate, plus Out::load(out[i]) when kAccumulate (v + old: the decoders' order).
template <typename Out, bool kSaturate, bool kAccumulate>
void store_floats(const float* values, size_t n, typename Out::Storage* out);

}  // namespace terse
