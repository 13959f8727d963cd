// The "# Using devices" block: one line per rank (rank, pid, host, and the GPU its buffers are
// on, or "host memory", where nccl-tests names the GPU), gathered to rank 0 with ncclAllGather
// over the communicator under test, so that ranks in other processes appear whatever launched
// them.
#pragma once

#include <string>

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

// Every rank calls it; rank 0 prints the block. `device` is this rank's GPU, or its index on
// its host with host buffers; `gpu` names the GPU ("" for host buffers).
void report_devices(RankContext& context, int device, const std::string& gpu);

}  // namespace perf
}  // namespace terse
