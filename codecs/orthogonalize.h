// Column math of PowerSGD, shared by the CPU path and the CUDA kernels: fixed-order dot
// products, the scaling that keeps norms free of overflow, and the Gram-Schmidt that turns
// P = M Q into an orthonormal basis.
//
// Why the order is fixed: in the distributed algorithm every rank orthogonalises the same
// allreduced P on its own, and the ranks must end with the same bits or their models drift
// apart; a CPU rank and a GPU rank too. So every reduction here is defined once:
//   dot(x, y) over n elements: lane l (0 <= l < 32) sums x[i] * y[i] for i = l, l + 32, ...
//   in increasing i (a product, then an add: no FMA), then the 32 lane sums combine in a fixed
//   tree (lane l += lane l + s for s = 16, 8, 4, 2, 1). The CPU runs it as 4 ymm (or 2 zmm)
//   accumulators, the GPU as one warp with shuffles.
//   max |x|: an integer max over the bit patterns (x & 0x7fffffff), order-free and exact; it
//   also flags NaN and Inf, which sort above every finite value.
//
// The orthogonalisation (orthogonalize_columns) is modified Gram-Schmidt with one classical
// re-orthogonalisation pass ("twice is enough"), robust to what gradients bring:
//   0. every column is scaled by a power of two (exact) so its largest entry lies in [1, 2):
//      its squared norm can neither overflow nor underflow; a column that is all zero or holds
//      NaN/Inf is replaced by a fixed pseudo-random column. n0 = its norm.
//   for each column c in order:
//   1. modified pass: for k < c: v_c -= (q_k . v_c) q_k
//   2. classical pass: h_k = q_k . v_c for all k < c (the same v_c), then
//      v_c = ((v_c - h_0 q_0) - h_1 q_1) - ... element by element
//   3. n1 = |v_c|; when n1 <= kCollapseRatio * n0 the column lay (numerically) in the span of
//      the earlier ones (a rank-deficient M): it is replaced by a pseudo-random column, which
//      goes through 1-2 again; should that collapse too (it cannot while c < rows, short of
//      astronomically bad luck), the column becomes zero.
//   4. v_c *= 1 / n1.
// The result has orthonormal columns (to fp32 rounding), never NaN, and the bits do not depend
// on how the work is split. Column c sees exactly the same operations whether the columns are
// processed left-looking (the CPU) or right-looking (the GPU applies q_k's modified-pass update
// to all later columns as soon as q_k is final).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/counter_rng.h"
#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {

// Lanes of the fixed-order dot product (one CUDA warp).
constexpr int kDotLanes = 32;

// Below this fraction of its norm after step 0, a column counts as collapsed: rounding noise
// after a projection is ~1e-7 of it, real directions are far above.
constexpr float kCollapseRatio = 1e-4f;

// Seeds of the replacement columns (step 0 and step 3 use different streams).
constexpr uint64_t kDegenerateColumnSeed = 0x6f7274686f30ull;
constexpr uint64_t kCollapsedColumnSeed = 0x6f7274686f31ull;

// Combines the 32 lane sums of a dot product in the fixed tree; `lanes` is overwritten.
TERSE_HD float combine_dot_lanes(float* lanes) {
  for (int stride = kDotLanes / 2; stride > 0; stride /= 2) {
    for (int lane = 0; lane < stride; ++lane) lanes[lane] = lanes[lane] + lanes[lane + stride];
  }
  return lanes[0];
}

// |x| as ordered bits: finite values sort by magnitude, Inf is 0x7f800000, NaN above.
TERSE_HD uint32_t abs_bits(float value) {
  return float_bits(value) & 0x7fffffffu;
}

TERSE_HD bool abs_bits_finite(uint32_t bits) {
  return bits < 0x7f800000u;
}

// The power of two that brings a column whose largest |entry| has bit pattern `max_abs` (finite,
// non-zero) into [1, 2); clamped to 2^-126 for the very largest values (they land in [2, 4)).
// Multiplying by it is exact for every entry that stays normal.
TERSE_HD float column_scale(uint32_t max_abs) {
  int exponent = static_cast<int>(max_abs >> 23);  // 0 for subnormals
  int scaled = 254 - exponent;                     // biased exponent of 2^(127 - exponent)
  if (scaled < 1) scaled = 1;
  return bits_float(static_cast<uint32_t>(scaled) << 23);
}

// Entry `index` of a pseudo-random column: the sum of four uniforms minus 2, a bell shape in
// [-2, 2) with mean 0 from plain fp32 additions (correctly rounded), so CPU and GPU agree bit
// for bit.
TERSE_HD float random_column_entry(uint64_t seed, uint64_t index) {
  float a = counter_uniform(seed, 4 * index);
  float b = counter_uniform(seed, 4 * index + 1);
  float c = counter_uniform(seed, 4 * index + 2);
  float d = counter_uniform(seed, 4 * index + 3);
  return ((a + b) + (c + d)) - 2.0f;
}

// Seed of the replacement for column `column` (its entries use indices 0..length-1).
TERSE_HD uint64_t replacement_seed(uint64_t base, int column) {
  return mix64(base ^ (static_cast<uint64_t>(column) << 32));
}

// Host versions; device versions are in cuda/powersgd_kernels.h. `columns` holds `count`
// columns of `length` floats, column c at columns + c * length.

// The fixed-order dot product described above.
float fixed_order_dot(const float* x, const float* y, size_t length);

// Largest abs_bits() over the column.
uint32_t column_max_abs_bits(const float* x, size_t length);

// Orthonormalises the columns in place (steps 0-4 above). count <= length is required for the
// result to be orthonormal; larger counts still give finite output.
void orthogonalize_columns(float* columns, size_t length, int count);

// Scales every column to unit norm (after step 0's power-of-two scaling); all-zero or
// non-finite columns become pseudo-random unit columns drawn from `seed`. PowerSGD applies it
// to the warm-started Q: a zero Q column (a tensor that was zero once) would otherwise stay
// zero forever, and an unnormalised Q compounds the matrix's scale step after step.
void normalize_columns(float* columns, size_t length, int count, uint64_t seed);

}  // namespace terse
