// Before a checked call: every rank's input in place and its receive buffer zeroed. After it:
// the number of elements of this rank's output that miss the float64 reference (exactly, or for
// a compressed allreduce by more than the stated bound, compression_figures.h).
#pragma once

#include <cstdint>

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

void prepare_row_inputs(RankContext& context, const RowCase& row, bool in_place);
int64_t count_row_wrong(const RankContext& context, const RowCase& row, bool in_place);
// For a compressed call: elements outside the bound of the codec and algorithm the last call
// used; *rel_err gets the largest error relative to the largest reference value.
int64_t count_row_outside_bound(const RankContext& context, const RowCase& row, bool in_place,
                                double* rel_err);

}  // namespace perf
}  // namespace terse
