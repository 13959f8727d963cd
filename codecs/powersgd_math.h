// Per-element math of PowerSGD shared by the CPU loops and the CUDA kernels: the initial Q and
// the reconstruction M^[i][j] = sum_c P[i][c] Q[j][c], summed in one fixed order (c = 0, 1, ...,
// a product then an add, no FMA) so that every rank and device decoding a message gets the same
// bits, and the encoder's error output equals input - decode exactly.
//
// Layouts (also the wire layout): M is row-major rows x cols; P (rows x rank) and Q (cols x
// rank) are column-major fp32, column c of P at p + c * rows, of Q at q + c * cols.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/orthogonalize.h"
#include "common/counter_rng.h"
#include "common/host_device.h"

namespace terse {

constexpr int kPowerSgdMaxRank = 256;
constexpr int kPowerSgdMaxIterations = 16;

// The initial Q of a step without a warm start: entries random_column_entry(seed, index) with
// index = c * cols + j. Fixed seeds, so ranks agree on Q without talking (the steps differ so a
// run without warm start explores new directions each step).
constexpr uint64_t kInitialQSeed = 0x7073676451ull;  // "psgdQ"

TERSE_HD uint64_t powersgd_initial_q_seed(uint64_t step) {
  return mix64(kInitialQSeed ^ mix64(step));
}

// First and further terms of the reconstruction sum; the CPU loop (which tiles over j) and the
// GPU kernel (a thread per element) both build the sum from these, in c order.
TERSE_HD float powersgd_first_term(float p, float q) {
  return p * q;
}
TERSE_HD float powersgd_add_term(float sum, float p, float q) {
  return sum + p * q;
}

TERSE_HD float powersgd_reconstruct_element(const float* p, const float* q, size_t rows,
                                            size_t cols, int rank, size_t i, size_t j) {
  float sum = powersgd_first_term(p[i], q[j]);
  for (int c = 1; c < rank; ++c) sum = powersgd_add_term(sum, p[c * rows + i], q[c * cols + j]);
  return sum;
}

}  // namespace terse
