// What the ranks agree on between measurements, through ncclAllReduce of host scalars on the
// communicators under test (so no MPI is needed for it, whatever launched the ranks): a
// barrier, the reported time (-a), and sums of wrong-element counts.
#pragma once

#include <nccl.h>

#include <cstdint>

namespace terse {
namespace perf {

class RankSync {
 public:
  // `slot` is this rank's thread in the process (the watchdog's slot).
  RankSync(ncclComm_t comm, int rank, int nranks, int slot)
      : comm_(comm), rank_(rank), nranks_(nranks), slot_(slot) {}

  // Returns once every rank has called it.
  void barrier();
  // -a: 0 rank 0's value, 1 the mean, 2 the minimum, 3 the maximum over the ranks.
  double combine_time(double seconds, int average);
  int64_t sum(int64_t value);
  double min(double value);

 private:
  double all_reduce(double value, ncclRedOp_t op);

  ncclComm_t comm_;
  int rank_;
  int nranks_;
  int slot_;
};

}  // namespace perf
}  // namespace terse
