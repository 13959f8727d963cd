// Per-element math of DGC (Deep Gradient Compression, Lin et al. 2018), shared by the CPU loops
// (dgc_codec.cpp) and the CUDA kernels (cuda/dgc_kernels.cu) so both keep bit-identical state.
#pragma once

#include <cmath>
#include <cstddef>

#include "codecs/dtype.h"
#include "common/host_device.h"

namespace terse {

// The gradient norm for local clipping is a sum in a fixed order, the same on both sides:
// chunks of kNormChunk squares (in double, zero past the end) reduced by a pairwise tree,
// s[t] += s[t + stride] for stride = kNormChunk/2 down to 1; then the per-chunk sums reduced the
// same way, chunk by chunk, until one value remains. A GPU block of kNormChunk/2 threads runs
// exactly this tree.
constexpr size_t kNormChunk = 1024;

template <typename In>
TERSE_HD double square_or_zero(const typename In::Storage* x, size_t count, size_t i) {
  if (i >= count) return 0.0;
  double value = In::load(x[i]);
  return value * value;
}

TERSE_HD double value_or_zero(const double* x, size_t count, size_t i) {
  return i < count ? x[i] : 0.0;
}

// The factor that clips a gradient of squared norm `sum_squares` to norm `clip` (0: off).
TERSE_HD float clip_scale(double sum_squares, float clip) {
  double norm = sqrt(sum_squares);
  return clip > 0.0f && norm > clip ? static_cast<float>(clip / norm) : 1.0f;
}

// Momentum correction: u = m u + g, then v = v + u (the velocity that accumulates until sent).
template <typename In>
TERSE_HD void dgc_update_element(const typename In::Storage* x, float scale, float momentum,
                                 float* u, float* v, size_t i) {
  float gradient = In::load(x[i]) * scale;
  float decayed = momentum * u[i];
  float momentum_now = decayed + gradient;
  u[i] = momentum_now;
  v[i] = v[i] + momentum_now;
}

}  // namespace terse
