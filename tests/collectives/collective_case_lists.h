// The case lists of the multi-rank collective tests, shared by ranks as threads
// (test_collectives_threads.cpp) and ranks as processes (rank_process/all_collectives.cpp), so
// both run the same matrix: every algorithm of the table by name, every type, op and placement,
// sizes 0, 1 and unaligned, and a few MiB per collective.
#pragma once

#include <vector>

#include "collective_case.h"

namespace terse {
namespace test {

struct AlgorithmVariant {
  CollectiveKind kind;
  const char* algorithm;
};

// Every algorithm of the table by name: those that only move data (broadcast, allgather,
// alltoall, gather, scatter), those of reduce and reduce-scatter, and those of allreduce.
const std::vector<AlgorithmVariant>& data_movement_variants();
const std::vector<AlgorithmVariant>& reducing_variants();
const std::vector<AlgorithmVariant>& allreduce_variants();

// A root other than 0 where there is one, so that the relative numbering is exercised.
int root_for(int nranks);

// Every data-movement algorithm x type x placement at 0, 1 and 1001 elements.
std::vector<CollectiveCase> data_movement_cases(int nranks);
// Every reduce and reduce-scatter algorithm x type x op x placement at 1001 elements, and each
// type at 0 and 1 element (fewer elements than ranks).
std::vector<CollectiveCase> reduction_cases(int nranks);
// The same for the allreduce algorithms, with 7 elements among the edges too.
std::vector<CollectiveCase> allreduce_cases(int nranks);
// A few MiB per collective through the communicator's own choice and the other algorithms by
// name, with the default 1 MiB pieces.
std::vector<CollectiveCase> several_mib_cases(int nranks);
// 16 MiB (plus three floats, so nothing divides evenly) of float sums through the
// communicator's choice.
CollectiveCase large_allreduce_case();

}  // namespace test
}  // namespace terse
