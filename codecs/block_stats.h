// Statistics of one block of a tensor that the low-bit quantizers turn into the scale they put on
// the wire (max |x|, sum |x|, sum x^2), computed in one fixed order so that the CPU and the GPU
// produce the same bits.
//
// The order: element k of a block (k = 0, 1, ...) is added to lane k % 32, in increasing k, each
// lane starting from 0. The 32 lanes then fold pairwise: lane j += lane j + 16 for j < 16, then
// lane j += lane j + 8 for j < 8, and so on down to lane 0. On the GPU one warp owns a block:
// lane l walks k = l, l + 32, ... and the fold is a __shfl_down_sync tree; on the CPU 32
// accumulators (four AVX2 registers) walk the block and fold the same way (fold_lanes below).
// max |x| is order-free, but it is NaN-sticky, so that a NaN anywhere makes the scale NaN (and the
// message refused) on both sides rather than silently ignored by one.
#pragma once

#include <cmath>
#include <cstddef>

#include "common/host_device.h"

namespace terse {

constexpr int kStatLanes = 32;

// Which statistics a quantizer needs (a bit mask); the others are not computed.
constexpr unsigned kStatMaxAbs = 1u;
constexpr unsigned kStatAbsSum = 2u;
constexpr unsigned kStatSquareSum = 4u;

struct BlockStats {
  float max_abs = 0.0f;
  float abs_sum = 0.0f;
  float square_sum = 0.0f;
};

// max(m, a) for a >= 0 that keeps a NaN once one is seen.
TERSE_HD float sticky_max(float m, float a) {
  return (a > m || a != a) ? a : m;
}

// The fixed pairwise fold of kStatLanes partial sums into lane 0 (the GPU's shuffle-down tree).
TERSE_HD float fold_sum_lanes(float* lanes) {
  for (int width = kStatLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] = lanes[j] + lanes[j + width];
  }
  return lanes[0];
}

TERSE_HD float fold_max_lanes(float* lanes) {
  for (int width = kStatLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] = sticky_max(lanes[j], lanes[j + width]);
  }
  return lanes[0];
}

// Adds element value `v` to lane accumulators: the per-element step both sides share.
template <unsigned kNeeded>
TERSE_HD void accumulate_stats(float v, float* max_abs, float* abs_sum, float* square_sum) {
  const float a = fabsf(v);
  if (kNeeded & kStatMaxAbs) *max_abs = sticky_max(*max_abs, a);
  if (kNeeded & kStatAbsSum) *abs_sum = *abs_sum + a;
  if (kNeeded & kStatSquareSum) *square_sum = *square_sum + v * v;
}

// The statistics of `n` elements at `x` on the CPU, in the order above. Inline so that it takes
// the instruction set of the dispatched loop that calls it.
template <typename In, unsigned kNeeded>
inline BlockStats block_stats_cpu(const typename In::Storage* x, size_t n) {
  float max_abs[kStatLanes] = {}, abs_sum[kStatLanes] = {}, square_sum[kStatLanes] = {};
  size_t k = 0;
  for (; k + kStatLanes <= n; k += kStatLanes) {
    for (int j = 0; j < kStatLanes; ++j) {
      accumulate_stats<kNeeded>(In::load(x[k + j]), &max_abs[j], &abs_sum[j], &square_sum[j]);
    }
  }
  for (int j = 0; k + j < n; ++j) {
    accumulate_stats<kNeeded>(In::load(x[k + j]), &max_abs[j], &abs_sum[j], &square_sum[j]);
  }
  BlockStats stats;
  if (kNeeded & kStatMaxAbs) stats.max_abs = fold_max_lanes(max_abs);
  if (kNeeded & kStatAbsSum) stats.abs_sum = fold_sum_lanes(abs_sum);
  if (kNeeded & kStatSquareSum) stats.square_sum = fold_sum_lanes(square_sum);
  return stats;
}

}  // namespace terse
