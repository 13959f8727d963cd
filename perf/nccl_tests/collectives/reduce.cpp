// reduce_perf: ncclReduce of `count` elements to the root (-r), which ends with the operator
// applied over all ranks' inputs. Every other rank's receive buffer must be left alone: zeros
// out of place, its own input in place. busbw = algbw.
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
                    int root, ncclComm_t comm, cudaStream_t stream) {
  return ncclReduce(send, recv, count, type, op, root, comm, stream);
}

Expectation expected(const CheckContext& context, size_t index) {
  if (context.rank == context.root) return context.pattern.reduced(index);
  if (context.in_place) return context.pattern.copied(context.rank, index);
  return {0.0, 0.0};
}

}  // namespace

const CollectiveTest& reduce_test() {
  static const CollectiveTest test = {"Reduce", OpUse::kReduces, true,   true,
                                      counts,   unit_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
