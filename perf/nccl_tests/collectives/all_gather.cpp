// all_gather_perf: ncclAllGather. Each rank sends a block of `count / n` elements (aligned to
// 16 bytes) and every rank receives all n blocks in rank order. The size column is the whole
// n-block buffer; busbw = algbw * (n - 1) / n. In place, a rank's block already sits at its
// place in the receive buffer.
#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

CallCounts counts(size_t count, size_t element_bytes, int nranks) {
  const size_t block = aligned_block(count, element_bytes, nranks);
  CallCounts result;
  result.send = block;
  result.recv = block * static_cast<size_t>(nranks);
  result.param = block;
  result.send_in_place = block;
  return result;
}

ncclResult_t launch(const void* send, void* recv, size_t count, ncclDataType_t type,
                    ncclRedOp_t /*op*/, int /*root*/, ncclComm_t comm, cudaStream_t stream) {
  return ncclAllGather(send, recv, count, type, comm, stream);
}

// Block j of the output is rank j's input.
Expectation expected(const CheckContext& context, size_t index) {
  const size_t block = context.counts.param;
  return context.pattern.copied(static_cast<int>(index / block), index % block);
}

}  // namespace

const CollectiveTest& all_gather_test() {
  static const CollectiveTest test = {"AllGather", OpUse::kNone,      false,  true,
                                      counts,      gather_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
