// reduce_perf: nccl-tests' reduce_perf for ncclReduce through libterse (perf/README.md).
#include "perf/nccl_tests/collectives/collectives.h"
#include "perf/nccl_tests/perf_main.h"

int main(int argc, char** argv) {
  return terse::perf::run_perf(argc, argv, terse::perf::reduce_test());
}
