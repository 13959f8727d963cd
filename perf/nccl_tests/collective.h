// What a perf binary measures: one NCCL call, described by its buffer layout, its bus-bandwidth
// factor, the call itself, and what every rank must find in its output afterwards. Each
// collective fills one of these (collectives/*.cpp); the harness does everything else.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {

// Element counts of one call for a row of `count` elements (size / element size), in
// nccl-tests' layout. In place, the call's input is recv + rank * send_in_place and its output
// recv + rank * recv_in_place.
struct CallCounts {
  size_t send = 0;   // elements of the send buffer
  size_t recv = 0;   // elements of the receive buffer (what is checked)
  size_t param = 0;  // the count argument of the call: the row's "count" column
  size_t send_in_place = 0;
  size_t recv_in_place = 0;
};

// Everything the expected value of an output element depends on.
struct CheckContext {
  const ValuePattern& pattern;  // every rank's inputs and their reduction
  int rank;
  int nranks;
  int root;  // -1 for collectives without one
  bool in_place;
  CallCounts counts;
};

// How a collective uses -o.
enum class OpUse {
  kReduces,       // runs once per operator, the operator named in the redop column
  kNone,          // moves data: runs once, redop column "none"
  kNamedIgnored,  // runs once per operator and names it, but the call takes none (sendrecv,
                  // as in nccl-tests)
};

struct CollectiveTest {
  const char* name;  // nccl-tests' name: "AllReduce", ...; the JSON's "collective"
  OpUse op_use;
  bool uses_root;        // broadcast, reduce: -r applies, the root column shows it
  bool checks_in_place;  // false: the in-place #wrong is N/A (send/recv into its own input)
  CallCounts (*counts)(size_t count, size_t element_bytes, int nranks);
  double (*bus_factor)(int nranks);
  ncclResult_t (*launch)(const void* send, void* recv, size_t count, ncclDataType_t type,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
  // What element `index` of the checked output (recv + rank * recv_in_place in place) must be.
  Expectation (*expected)(const CheckContext& context, size_t index);
};

// The per-rank block of the gathering collectives: count / nranks, rounded down to a multiple
// of 16 bytes as nccl-tests does (so blocks stay aligned).
inline size_t aligned_block(size_t count, size_t element_bytes, int nranks) {
  const size_t per_rank = count / static_cast<size_t>(nranks);
  const size_t granule = element_bytes < 16 ? 16 / element_bytes : 1;
  return per_rank - per_rank % granule;
}

}  // namespace perf
}  // namespace terse
