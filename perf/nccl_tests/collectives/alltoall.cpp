// alltoall_perf: ncclAlltoAll. Each rank sends block j (of `count / n` elements, aligned to 16
// bytes) to rank j and receives rank j's block `rank` into its block j. The size column is the
// whole n-block buffer; busbw = algbw * (n - 1) / n. terse defines the in-place exchange, so
// unlike nccl-tests (which prints N/A there) the in-place half is checked too.
#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

CallCounts counts(size_t count, size_t element_bytes, int nranks) {
  const size_t block = aligned_block(count, element_bytes, nranks);
  CallCounts result;
  result.send = result.recv = block * static_cast<size_t>(nranks);
  result.param = block;
  return result;
}

ncclResult_t launch(const void* send, void* recv, size_t count, ncclDataType_t type,
                    ncclRedOp_t /*op*/, int /*root*/, ncclComm_t comm, cudaStream_t stream) {
  return ncclAlltoAll(send, recv, count, type, comm, stream);
}

// Block j of the output is block `rank` of rank j's input.
Expectation expected(const CheckContext& context, size_t index) {
  const size_t block = context.counts.param;
  const int source = static_cast<int>(index / block);
  return context.pattern.copied(source, static_cast<size_t>(context.rank) * block + index % block);
}

}  // namespace

const CollectiveTest& alltoall_test() {
  static const CollectiveTest test = {"AlltoAll", OpUse::kNone,      false,  true,
                                      counts,     gather_bus_factor, launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
