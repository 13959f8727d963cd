#include "collective_case_lists.h"

namespace terse {
namespace test {

using K = CollectiveKind;

const std::vector<AlgorithmVariant>& data_movement_variants() {
  static const std::vector<AlgorithmVariant> variants = {
      {K::kBroadcast, "tree"},    {K::kBroadcast, "chain"}, {K::kAllGather, "ring"},
      {K::kAllToAll, "pairwise"}, {K::kGather, "direct"},   {K::kScatter, "direct"}};
  return variants;
}

const std::vector<AlgorithmVariant>& reducing_variants() {
  static const std::vector<AlgorithmVariant> variants = {
      {K::kReduce, "tree"}, {K::kReduce, "chain"}, {K::kReduceScatter, "ring"}};
  return variants;
}

const std::vector<AlgorithmVariant>& allreduce_variants() {
  static const std::vector<AlgorithmVariant> variants = {{K::kAllReduce, "ring"},
                                                         {K::kAllReduce, "recursive_doubling"}};
  return variants;
}

int root_for(int nranks) {
  return nranks > 1 ? nranks - 2 + (nranks == 2) : 0;
}

std::vector<CollectiveCase> data_movement_cases(int nranks) {
  std::vector<CollectiveCase> cases;
  for (const AlgorithmVariant& v : data_movement_variants()) {
    for (ncclDataType_t type : all_types()) {
      for (size_t count : {0, 1, 1001}) {
        for (bool in_place : {false, true}) {
          cases.push_back(
              {v.kind, v.algorithm, type, TestOp::kSum, count, in_place, root_for(nranks)});
        }
      }
    }
  }
  return cases;
}

namespace {

// Every type x op x placement at 1001 elements, and the edges: nothing, and fewer elements
// than ranks, for each of `variants`.
std::vector<CollectiveCase> reducing_cases(const std::vector<AlgorithmVariant>& variants,
                                           const std::vector<size_t>& edges, int nranks) {
  std::vector<CollectiveCase> cases;
  for (const AlgorithmVariant& v : variants) {
    for (ncclDataType_t type : all_types()) {
      for (TestOp op : all_ops()) {
        for (bool in_place : {false, true}) {
          cases.push_back({v.kind, v.algorithm, type, op, 1001, in_place, root_for(nranks)});
        }
      }
      for (size_t count : edges) {
        cases.push_back({v.kind, v.algorithm, type, TestOp::kAvg, count, count == 1, 0});
      }
    }
  }
  return cases;
}

}  // namespace

std::vector<CollectiveCase> reduction_cases(int nranks) {
  return reducing_cases(reducing_variants(), {0, 1}, nranks);
}

std::vector<CollectiveCase> allreduce_cases(int nranks) {
  return reducing_cases(allreduce_variants(), {0, 1, 7}, nranks);
}

std::vector<CollectiveCase> several_mib_cases(int nranks) {
  const size_t mib = size_t{1} << 20;
  const size_t n = static_cast<size_t>(nranks);
  const int root = root_for(nranks);
  // Mostly 8-byte types: the test's own cost (inputs, references, checks) is per element.
  return {
      {K::kBroadcast, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 + 5, false, root},
      {K::kBroadcast, "tree", ncclInt64, TestOp::kSum, 2 * mib / 8 + 1, true, root},
      {K::kReduce, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 + 5, false, root},
      {K::kReduce, "tree", ncclBfloat16, TestOp::kAvg, mib / 2 + 3, true, root},
      {K::kAllGather, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, false, 0},
      {K::kReduceScatter, nullptr, ncclFloat64, TestOp::kPreMulSum, 3 * mib / 8 / n + 1, true, 0},
      {K::kReduceScatter, nullptr, ncclInt32, TestOp::kMax, mib / 4 / n + 1, false, 0},
      {K::kAllToAll, nullptr, ncclUint64, TestOp::kSum, 3 * mib / 8 / n + 1, false, 0},
      {K::kAllToAll, nullptr, ncclUint32, TestOp::kSum, mib / 4 / n + 1, true, 0},
      {K::kGather, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, false, root},
      {K::kScatter, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 / n + 1, true, root},
      {K::kAllReduce, nullptr, ncclFloat64, TestOp::kSum, 3 * mib / 8 + 5, false, 0},
      {K::kAllReduce, "recursive_doubling", ncclBfloat16, TestOp::kAvg, mib / 2 + 3, true, 0},
  };
}

CollectiveCase large_allreduce_case() {
  return {K::kAllReduce, nullptr, ncclFloat32, TestOp::kSum, (size_t{16} << 20) / 4 + 3, false, 0};
}

}  // namespace test
}  // namespace terse
