#include "perf/nccl_tests/rank_sync.h"

#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {

void RankSync::barrier() {
  int32_t token = 0;
  CallTimer timer(slot_, "the barrier (ncclAllReduce)");
  TERSE_PERF_NCCL(ncclAllReduce(&token, &token, 1, ncclInt32, ncclSum, comm_, nullptr));
}

double RankSync::combine_time(double seconds, int average) {
  switch (average) {
    case 0:
      return all_reduce(rank_ == 0 ? seconds : 0.0, ncclSum);
    case 2:
      return all_reduce(seconds, ncclMin);
    case 3:
      return all_reduce(seconds, ncclMax);
    default:
      return all_reduce(seconds, ncclSum) / nranks_;
  }
}

int64_t RankSync::sum(int64_t value) {
  CallTimer timer(slot_, "a sum over ranks (ncclAllReduce)");
  TERSE_PERF_NCCL(ncclAllReduce(&value, &value, 1, ncclInt64, ncclSum, comm_, nullptr));
  return value;
}

double RankSync::min(double value) {
  return all_reduce(value, ncclMin);
}

double RankSync::all_reduce(double value, ncclRedOp_t op) {
  CallTimer timer(slot_, "a reduction over ranks (ncclAllReduce)");
  TERSE_PERF_NCCL(ncclAllReduce(&value, &value, 1, ncclFloat64, op, comm_, nullptr));
  return value;
}

}  // namespace perf
}  // namespace terse
