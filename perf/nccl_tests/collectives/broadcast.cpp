// broadcast_perf: ncclBroadcast of `count` elements from the root (-r) to every rank, which
// then holds the root's input. busbw = algbw.
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

ncclResult_t launch(const void* send, void* recv, size_t count, ncclDataType_t type,
                    ncclRedOp_t /*op*/, int root, ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(send, recv, count, type, root, comm, stream);
}

Expectation expected(const CheckContext& context, size_t index) {
  return context.pattern.copied(context.root, index);
}

}  // namespace

const CollectiveTest& broadcast_test() {
  static const CollectiveTest test = {"Broadcast", OpUse::kNone,    true,   true,
                                      counts,      unit_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
