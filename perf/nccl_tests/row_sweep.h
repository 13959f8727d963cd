// The rows of one run (nccl-tests' RunTest and TimeTest): for every datatype, operator and root
// asked for, a warm-up over the sizes, then one row per size, each measured out of place and
// in place. Rank 0 prints the rows as they complete and records them for -J.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

struct SweepTotals {
  double busbw_sum = 0;  // over every half of every row
  int busbw_count = 0;
  int64_t failed_checks = 0;  // this rank's checks that found wrong elements
};

// Runs every row, sizes from `min_bytes` to `max_bytes` (-b and -e after any memory limit).
SweepTotals run_rows(RankContext& context, size_t min_bytes, size_t max_bytes);

}  // namespace perf
}  // namespace terse
