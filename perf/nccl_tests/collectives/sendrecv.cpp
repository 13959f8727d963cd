// sendrecv_perf: in one group, every rank ncclSends `count` elements to rank + 1 and ncclRecvs
// as many from rank - 1 (a ring), so it ends with the previous rank's input. busbw = algbw.
// In place would send from and receive into the same buffer at once: measured, not checked
// (N/A), as in nccl-tests. Like nccl-tests it runs once per -o operator, which it ignores.
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
                    ncclRedOp_t /*op*/, int /*root*/, ncclComm_t comm, cudaStream_t stream) {
  int rank = 0, nranks = 1;
  ncclResult_t result = ncclCommUserRank(comm, &rank);
  if (result == ncclSuccess) result = ncclCommCount(comm, &nranks);
  if (result != ncclSuccess) return result;
  result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  const ncclResult_t sent = ncclSend(send, count, type, (rank + 1) % nranks, comm, stream);
  const ncclResult_t received =
      ncclRecv(recv, count, type, (rank - 1 + nranks) % nranks, comm, stream);
  const ncclResult_t ended = ncclGroupEnd();
  if (sent != ncclSuccess) return sent;
  if (received != ncclSuccess) return received;
  return ended;
}

Expectation expected(const CheckContext& context, size_t index) {
  return context.pattern.copied((context.rank - 1 + context.nranks) % context.nranks, index);
}

}  // namespace

const CollectiveTest& sendrecv_test() {
  static const CollectiveTest test = {"SendRecv", OpUse::kNamedIgnored, false,  false,
                                      counts,     unit_bus_factor,      launch, expected};
  return test;
}

}  // namespace perf
}  // namespace terse
