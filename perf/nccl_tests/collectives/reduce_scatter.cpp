// reduce_scatter_perf: ncclReduceScatter. Each rank sends n blocks of `count / n` elements
// (aligned to 16 bytes) and receives block `rank` reduced over all ranks. The size column is
// the whole n-block input; busbw = algbw * (n - 1) / n. In place, a rank's result lands on its
// own block of the input.
#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

CallCounts counts(size_t count, size_t element_bytes, int nranks) {
  const size_t block = aligned_block(count, element_bytes, nranks);
  CallCounts result;
  result.send = block * static_cast<size_t>(nranks);
  result.recv = block;
  result.param = block;
  result.recv_in_place = block;
  return result;
}

ncclResult_t launch(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                    int /*root*/, ncclComm_t comm, cudaStream_t stream) {
  return ncclReduceScatter(send, recv, count, type, op, comm, stream);
}

Expectation expected(const CheckContext& context, size_t index) {
  return context.pattern.reduced(static_cast<size_t>(context.rank) * context.counts.param + index);
}

}  // namespace

const CollectiveTest& reduce_scatter_test() {
  static const CollectiveTest test = {"ReduceScatter", OpUse::kReduces,   false,  true,
                                      counts,          gather_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
