// The "# Using devices" block: one line per rank (rank, pid, host, and "host memory" where
// nccl-tests names the GPU), gathered to rank 0 with ncclAllGather over the communicator under
// test, so that ranks in other processes appear whatever launched them.
#pragma once

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

// Every rank calls it; rank 0 prints the block. `device` is this rank's index on its host.
void report_devices(RankContext& context, int device);

}  // namespace perf
}  // namespace terse
