// all_reduce_perf: ncclAllReduce of `count` elements. Every rank ends with the operator applied
// over all ranks' inputs, element by element. busbw = algbw * 2 (n - 1) / n.
#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

CallCounts counts(size_t count, size_t /*element_bytes*/, int /*nranks*/) {
  CallCounts result;
  result.send = result.recv = result.param = count;
  return result;
}

ncclResult_t launch(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                    int /*root*/, ncclComm_t comm, cudaStream_t stream) {
  return ncclAllReduce(send, recv, count, type, op, comm, stream);
}

Expectation expected(const CheckContext& context, size_t index) {
  return context.pattern.reduced(index);
}

}  // namespace

const CollectiveTest& all_reduce_test() {
  static const CollectiveTest test = {"AllReduce", OpUse::kReduces,      false,  true,
                                      counts,      allreduce_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
