// The timing loop of one half of a row (out-of-place or in-place), as nccl-tests' BenchTime:
// inputs filled when checking, one untimed call, a barrier, -n timed iterations of -m calls
// each (grouped when -m > 1; with -z 1 a barrier after each), the mean time combined across
// ranks (-a), then -c checked calls whose wrong elements are summed over all ranks. With device
// buffers the batch is timed until the rank's stream has run it (cudaStreamSynchronize), as
// nccl-tests times it, since a call returns once it is queued.
#pragma once

#include "perf/nccl_tests/json_report.h"
#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

// `*failed_checks` counts this rank's checks that found wrong elements (the out-of-bounds
// count of the footer, summed over ranks at the end).
HalfResult measure_half(RankContext& context, const RowCase& row, bool in_place,
                        int64_t* failed_checks);

// One call as the timed loop issues it. `iteration` moves the buffers through the allocation
// so that consecutive calls do not reuse cache-hot bytes (nccl-tests does the same).
void launch_call(RankContext& context, const RowCase& row, bool in_place, int iteration);

// Whether the row's calls are compressed: TERSE_CODEC asks for it and the call is an allreduce
// terse can compress (sum or avg of fp32, fp16 or bf16).
bool compresses(const RankContext& context, const RowCase& row);

}  // namespace perf
}  // namespace terse
