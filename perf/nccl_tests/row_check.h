// Before a checked call: every rank's input in place and its receive buffer zeroed (or, for a
// compressed allreduce, filled with NaN, so that an element the call does not write is wrong).
// After it: the number of elements of this rank's output that miss the float64 reference
// exactly (a compressed allreduce is checked against its model instead, model_check.h).
// With device buffers both go through the pinned mirrors (rank_buffers.h).
#pragma once

#include <cstdint>

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

void prepare_row_inputs(RankContext& context, const RowCase& row, bool in_place,
                        bool nan_output = false);
int64_t count_row_wrong(const RankContext& context, const RowCase& row, bool in_place);

// This rank's checked output of the call just made (counts.recv elements), readable on the
// host: copied back from device buffers once the call has run.
const char* checked_output(const RankContext& context, const RowCase& row, bool in_place);

}  // namespace perf
}  // namespace terse
