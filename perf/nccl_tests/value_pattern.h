// What every rank puts in its send buffer, and what a collective must give back, computed in
// float64.
//
// Inputs are small integers (for prod: +-1 and +-2), chosen per datatype, operator and rank
// count so that every input, and every partial result over any subset of ranks, is exactly
// representable in the datatype: the magnitude of an input is at most exact_limit / nranks
// (halved for mulsum, whose scalars are 1 and 2), so sums stay exact whatever order an
// algorithm adds them in, and products multiply at most max_power_of_two twos. Integers, and
// sum, prod, max, min, mulsum and data movement of floats, are therefore compared exactly.
//
// Tolerance: only avg of floats is inexact (every input is scaled by 1/nranks, itself rounded,
// and the scaled values are rounded to the datatype and summed). Each of the at most
// nranks - 1 partial sums a rank forwards is rounded (an error of at most u * S, S the sum of
// the magnitudes of the scaled contributions), the scaling rounds each input once more, and
// the factor may be off by one rounding too. So an avg element is right when
//   |result - reference| <= (nranks + 2) * u * S
// with u the unit roundoff of the datatype, relative to S: fp16 2^-11, bf16 2^-8,
// f8e4m3 2^-4, f8e5m2 2^-3 (float 2^-24, double 2^-53).
#pragma once

#include <cstddef>

#include "perf/nccl_tests/data_types.h"

namespace terse {
namespace perf {

// A reference value and how far a result may be from it.
struct Expectation {
  double value = 0;
  double tolerance = 0;
};

class ValuePattern {
 public:
  // `op` is kNone for collectives that move data without reducing it. `scrambled` spreads the
  // same integers pseudo-randomly over the indices instead of in runs of consecutive values,
  // whose regular steps a quantizer would represent exactly (compressed runs need inputs that
  // look like data: compression_figures.h), and keeps every sum inside fp16's range.
  ValuePattern(const DataTypeInfo& type, Reduction op, int nranks, bool scrambled = false);

  // Element `index` of `rank`'s input: exactly representable in the datatype.
  double input(int rank, size_t index) const;
  // The scalar `rank` passes to ncclRedOpCreatePreMulSum for mulsum: 1 on even ranks, 2 on odd.
  double premul_scalar(int rank) const;

  // The operator applied over every rank's input at `index`.
  Expectation reduced(size_t index) const;
  // `rank`'s input at `index`, to be found unchanged.
  Expectation copied(int rank, size_t index) const { return {input(rank, index), 0.0}; }

  int nranks() const { return nranks_; }
  // No input of any rank is larger in magnitude (sum, avg and mulsum patterns).
  double magnitude() const { return magnitude_; }

 private:
  const DataTypeInfo& type_;
  Reduction op_;
  int nranks_;
  double magnitude_ = 1;    // inputs lie in [-magnitude_, magnitude_] ([0, .] unsigned)
  int contributing_ranks_;  // ranks beyond this contribute 0 (narrow types, huge rank counts)
  bool scrambled_ = false;
};

}  // namespace perf
}  // namespace terse
