// Host side of the shared column math (orthogonalize.h). The loops are written so that GCC
// vectorises them without changing the order of any floating-point operation: the dot keeps
// its 32 lane sums in registers, updates are element-wise.
#include "codecs/orthogonalize.h"

#include <cmath>
#include <vector>

#include "codecs/powersgd_math.h"

namespace terse {
namespace {

TERSE_CPU_DISPATCH void scale_column(float* x, size_t length, float scale) {
  for (size_t i = 0; i < length; ++i) x[i] = x[i] * scale;
}

// v -= h * q, element-wise (a product, then a subtraction).
TERSE_CPU_DISPATCH void subtract_scaled(float* v, const float* q, float h, size_t length) {
  for (size_t i = 0; i < length; ++i) v[i] = v[i] - h * q[i];
}

void fill_random(float* x, size_t length, uint64_t seed) {
  for (size_t i = 0; i < length; ++i) x[i] = random_column_entry(seed, i);
}

void fill_zero(float* x, size_t length) {
  for (size_t i = 0; i < length; ++i) x[i] = 0.0f;
}

// Step 0: scales the column so its largest entry is in [1, 2), or replaces it (all zero,
// NaN or Inf) by the pseudo-random column of `replacement`. Returns the column's norm.
float prepare_column(float* v, size_t length, uint64_t replacement) {
  uint32_t max_abs = column_max_abs_bits(v, length);
  if (max_abs == 0 || !abs_bits_finite(max_abs)) {
    fill_random(v, length, replacement);
  } else {
    scale_column(v, length, column_scale(max_abs));
  }
  return sqrtf(fixed_order_dot(v, v, length));
}

// Steps 1-2 for column c against the finished columns 0..c-1; returns the norm left.
float project_out_earlier(float* columns, size_t length, int c, float* coefficients) {
  float* v = columns + c * length;
  for (int k = 0; k < c; ++k) {
    const float* q = columns + k * length;
    subtract_scaled(v, q, fixed_order_dot(q, v, length), length);
  }
  for (int k = 0; k < c; ++k) coefficients[k] = fixed_order_dot(columns + k * length, v, length);
  for (int k = 0; k < c; ++k) subtract_scaled(v, columns + k * length, coefficients[k], length);
  return sqrtf(fixed_order_dot(v, v, length));
}

}  // namespace

TERSE_CPU_DISPATCH float fixed_order_dot(const float* x, const float* y, size_t length) {
  float lanes[kDotLanes] = {};
  size_t full = length - length % kDotLanes;
  for (size_t i = 0; i < full; i += kDotLanes) {
    for (int lane = 0; lane < kDotLanes; ++lane) {
      lanes[lane] = lanes[lane] + x[i + lane] * y[i + lane];
    }
  }
  for (size_t i = full; i < length; ++i) lanes[i - full] = lanes[i - full] + x[i] * y[i];
  return combine_dot_lanes(lanes);
}

TERSE_CPU_DISPATCH uint32_t column_max_abs_bits(const float* x, size_t length) {
  uint32_t max_abs = 0;
  for (size_t i = 0; i < length; ++i) {
    uint32_t bits = abs_bits(x[i]);
    max_abs = bits > max_abs ? bits : max_abs;
  }
  return max_abs;
}

void orthogonalize_columns(float* columns, size_t length, int count) {
  if (length == 0 || count <= 0) return;
  // Two floats per column: on the stack up to PowerSGD's largest rank (2 KiB), so that a
  // PowerSGD step, which orthogonalises every iteration, allocates nothing; more columns (only
  // a direct caller asks for them) take the heap.
  float initial_norm_on_stack[kPowerSgdMaxRank], coefficients_on_stack[kPowerSgdMaxRank];
  std::vector<float> initial_norm_on_heap, coefficients_on_heap;
  float* initial_norm = initial_norm_on_stack;
  float* coefficients = coefficients_on_stack;
  if (count > kPowerSgdMaxRank) {
    initial_norm_on_heap.resize(count);
    coefficients_on_heap.resize(count);
    initial_norm = initial_norm_on_heap.data();
    coefficients = coefficients_on_heap.data();
  }
  for (int c = 0; c < count; ++c) {
    initial_norm[c] =
        prepare_column(columns + c * length, length, replacement_seed(kDegenerateColumnSeed, c));
  }
  for (int c = 0; c < count; ++c) {
    float* v = columns + c * length;
    float norm = project_out_earlier(columns, length, c, coefficients);
    if (!(norm > kCollapseRatio * initial_norm[c])) {
      fill_random(v, length, replacement_seed(kCollapsedColumnSeed, c));
      float replacement_norm = sqrtf(fixed_order_dot(v, v, length));
      norm = project_out_earlier(columns, length, c, coefficients);
      if (!(norm > kCollapseRatio * replacement_norm)) {
        fill_zero(v, length);
        continue;
      }
    }
    scale_column(v, length, 1.0f / norm);
  }
}

void normalize_columns(float* columns, size_t length, int count, uint64_t seed) {
  for (int c = 0; c < count; ++c) {
    float* v = columns + c * length;
    float norm = prepare_column(v, length, replacement_seed(seed, c));
    if (!(norm > 0.0f)) {  // a replacement that came out all zero: take a unit vector
      fill_zero(v, length);
      if (length > 0) v[0] = 1.0f;
      continue;
    }
    scale_column(v, length, 1.0f / norm);
  }
}

}  // namespace terse
