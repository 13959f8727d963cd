// Bandwidth as nccl-tests reports it. algbw is the bytes of the row's size column over the time
// (GB/s, 10^9 bytes). busbw scales algbw by what the collective's optimal algorithm moves over
// the busiest link, so that every collective's busbw compares with the hardware's peak:
//   allreduce                          2 (n - 1) / n
//   allgather, reduce_scatter, alltoall    (n - 1) / n   (size = the whole n-rank buffer)
//   broadcast, reduce, sendrecv            1
#pragma once

#include <cstddef>

namespace terse {
namespace perf {

double allreduce_bus_factor(int nranks);
double gather_bus_factor(int nranks);  // allgather, reduce_scatter, alltoall
double unit_bus_factor(int nranks);    // broadcast, reduce, sendrecv

struct Bandwidth {
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
};

Bandwidth bandwidth(size_t bytes, double seconds, double bus_factor);

}  // namespace perf
}  // namespace terse
