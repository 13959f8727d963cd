// What the allreduce tests share: N ranks as threads, each with its own real UCX transport,
// running a list of cases through one algorithm and checking them against the float64
// reference of reduction_reference.h (inputs, reference and per-type tolerances live there).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/collective_args.h"
#include "reduction_reference.h"
#include "transport/transport.h"

namespace terse {
namespace test {

struct AllreduceCase {
  ncclDataType_t type;
  TestOp op;
  size_t count;
  bool in_place;
};

std::string describe(const AllreduceCase& c);

// Every type x op x placement at each of `counts`.
std::vector<AllreduceCase> full_matrix(const std::vector<size_t>& counts);

using AllreduceFunction = ncclResult_t (*)(const CollectiveArgs&, const AlgorithmContext&);

// Runs every case through `algorithm` on `nranks` ranks (threads, each with its own transport
// on loopback), checking every element of every rank against the reference and that all ranks
// hold bitwise identical results. Failures are reported through gtest, at most a few per case.
// `piece_bytes` goes into AlgorithmContext::piece_bytes.
void run_allreduce_cases(AllreduceFunction algorithm, int nranks,
                         const std::vector<AllreduceCase>& cases,
                         size_t piece_bytes = kDefaultPieceBytes);

// Runs body(transport) on `nranks` threads, each with a transport of one fresh communicator.
void run_with_transports(int nranks, const std::function<void(Transport&)>& body);

}  // namespace test
}  // namespace terse
