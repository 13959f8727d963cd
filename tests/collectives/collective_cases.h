// One collective call described as data, and a runner that makes every rank of a world run a
// list of them and checks every output element against a float64 reference: exact for data
// movement, and within allreduce_test_support.h's stated per-type bound for reductions. Inputs
// are allreduce_test_support.h's input_value(type, op, rank, element), where `element` counts
// over the whole send buffer of the rank (all n blocks where it has n).
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "allreduce_test_support.h"
#include "collectives/collective_args.h"
#include "communicator_test_support.h"

namespace terse {
namespace test {

struct CollectiveCase {
  CollectiveKind kind;
  const char* algorithm;  // a table name for `kind`, or nullptr for the communicator's choice
  ncclDataType_t type;
  TestOp op;     // reducing collectives only; the others move input_value(type, kSum, ...)
  size_t count;  // as CollectiveArgs counts it
  bool in_place;
  int root;  // rooted collectives
};

std::string describe(const CollectiveCase& c);

// Runs every case on every rank of `world` (in order, all ranks together) and checks outputs,
// guard bytes around them, and that out-of-place inputs stay unchanged. Buffers a rank does not
// use (sendbuff off the root of broadcast/scatter, recvbuff off the root of reduce/gather) are
// passed as NULL.
void run_collective_cases(CommunicatorWorld& world, const std::vector<CollectiveCase>& cases);

}  // namespace test
}  // namespace terse
