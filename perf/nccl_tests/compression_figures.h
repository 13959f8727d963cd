// The compression columns of the perf table (DESIGN.md section 11): when TERSE_CODEC is set (or
// -Z, which sets it), every allreduce row also shows the codec the calls ran with, the traffic
// ratio (bytes the ranks sent / what an uncompressed ring would send, from terse.h's
// statistics), and the largest error relative to the largest reference value; #wrong counts the
// elements outside the codec's stated bound instead of demanding exact results.
//
// The bound is terse.h's: S_sum ((1 + factor)^steps - 1) plus fp32 arithmetic and the output
// type's rounding, with factor from terseCodecErrorBound for the codec the call used, steps from
// terseAlgorithmLossySteps for its algorithm, and S_sum the ranks' largest input magnitudes (or
// L2 norms) added up, computed from the value pattern, which knows every rank's input.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {

// Whether the run compresses (TERSE_CODEC set to anything but "none").
bool compression_requested();

// What a half's calls did, from the statistics before and after them.
struct CompressionFigures {
  std::string codec = "none";  // codec name of the last call ("none" when uncompressed)
  double ratio = 1.0;          // wire bytes / dense ring bytes
  double encode_us = 0;        // per call, this rank
  double decode_us = 0;
};

// Fills the traffic figures from two snapshots around `calls` calls.
CompressionFigures compression_figures(const terseStats& before, const terseStats& after,
                                       int calls);

// The stated bound of one compressed allreduce (terse.h): per encode |C(x)_i - x_i| <= factor S(x),
// through `steps` lossy encodes.
struct StatedBound {
  double factor = 0;  // terseCodecErrorBound
  bool l2 = false;    // S is the L2 norm of a rank's input, not its largest magnitude
  int steps = 0;      // terseAlgorithmLossySteps
};

// The bound of the last allreduce on `comm` (`count` elements over `nranks` ranks), from the codec
// and algorithm it used; false when that call was not compressed.
bool last_call_bound(ncclComm_t comm, size_t count, int nranks, StatedBound* bound);

// S_sum: the sum over the pattern's ranks of S(input), S the largest magnitude or (l2) the L2
// norm of the rank's first `count` inputs.
double input_norm_sum(const ValuePattern& pattern, size_t count, bool l2);

// The largest |result_i - reference_i| the bound allows, mirroring allreduce_error_bound
// (collectives/compressed/compressed_error_bound.cpp, which the perf binaries do not link):
//   (S_sum ((1 + factor)^steps - 1) + 64 * 2^-24 * S_sum (1 + factor)^steps) * scale
// (the second term: fp32 sums and decodes), plus, for a 16-bit output (unit roundoff above
// 2^-20), one rounding of the result: unit_roundoff (max_reference + that). `scale` is the
// result's (1/nranks for avg), max_reference bounds |reference_i|.
double allreduce_bound(const StatedBound& bound, double norm_sum, double scale,
                       double unit_roundoff, double max_reference);

// Counts the elements of `data` (`count` of `type`) farther than `bound` (plus the pattern's own
// tolerance) from the pattern's reduction, and sets *rel_err to the largest error over the
// largest reference magnitude.
int64_t count_outside_bound(ncclDataType_t type, const void* data, size_t count,
                            const ValuePattern& pattern, double bound, double* rel_err);

// The extra columns of a row: codec, ratio, rel_err (result_table.h has their header).
std::string compression_columns(const std::string& codec, double ratio, double rel_err);

}  // namespace perf
}  // namespace terse
