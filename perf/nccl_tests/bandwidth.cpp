#include "perf/nccl_tests/bandwidth.h"

namespace terse {
namespace perf {

double allreduce_bus_factor(int nranks) {
  return 2.0 * (nranks - 1) / nranks;
}

double gather_bus_factor(int nranks) {
  return static_cast<double>(nranks - 1) / nranks;
}

double unit_bus_factor(int /*nranks*/) {
  return 1.0;
}

Bandwidth bandwidth(size_t bytes, double seconds, double bus_factor) {
  Bandwidth result;
  result.algbw = static_cast<double>(bytes) / 1.0e9 / seconds;
  result.busbw = result.algbw * bus_factor;
  return result;
}

}  // namespace perf
}  // namespace terse
