// One collective call described as data, run on one rank and checked there: every output
// element against a float64 reference (exact for data movement, within reduction_reference.h's
// stated per-type bound for reductions), the guard bytes around every buffer, and out-of-place
// inputs unchanged. Inputs are reduction_reference.h's input_value(type, op, rank, element),
// where `element` counts over the whole send buffer of the rank (all n blocks where it has n).
//
// No GoogleTest here: the thread tests turn the failures into gtest failures
// (collective_cases.h), the rank processes print them and exit non-zero.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "collectives/collective_args.h"
#include "collectives/communicator.h"
#include "reduction_reference.h"

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

// The reference the checks of `c` need on `nranks` ranks: the reduction's values and
// tolerances for allreduce, reduce and reduce-scatter (over every element of the n-block input
// for reduce-scatter); empty for data movement, which is checked exactly against input_value.
Reference reference_for(const CollectiveCase& c, int nranks);

struct CaseOutcome {
  // The call itself failed (or could not be made): the other ranks may now wait for this one
  // until their deadline, so a runner stops at the first such case.
  bool call_failed = false;
  // One sentence per problem (rank, case, element, value, expectation), at most a few per case.
  std::vector<std::string> failures;
};

// Runs `c` on this rank (all ranks of the communicator must run it together) and checks it.
// Buffers a rank does not use (sendbuff off the root of broadcast/scatter, recvbuff off the
// root of reduce/gather) are passed as NULL.
CaseOutcome run_collective_case(Communicator& comm, const CollectiveCase& c,
                                const Reference& reference);

}  // namespace test
}  // namespace terse
