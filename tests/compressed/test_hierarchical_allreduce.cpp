// The hierarchical compressed allreduce (hierarchical_allreduce.cpp): nodes modelled by per-rank
// host identities, as TERSE_HOSTID sets them. Stated bound: the leaders' default algorithm over
// the node sums, whose norms add up to at most the ranks' (lossy_steps of the table's
// "hierarchical" row); every rank bitwise identical; and the check that hierarchical
// gives the same result as flat: both within their bounds of the exact sum, so within the sum of
// the bounds of each other, and equal to fp32 rounding for the lossless codec.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& hierarchical() {
  return *find_compressed_algorithm("hierarchical");
}

struct Layout {
  const char* name;
  std::vector<std::string> hosts;
};

std::vector<Layout> layouts() {
  return {{"two_by_two", {"a", "a", "b", "b"}},
          {"three_three_two", {"a", "a", "a", "b", "b", "b", "c", "c"}},
          {"interleaved", {"a", "b", "a", "b"}},
          {"one_per_node", {"a", "b", "c"}},
          {"one_node", {"a", "a", "a", "a"}}};
}

struct CodecCase {
  const char* spec;
  MemoryKind memory;
};

const CodecCase kCodecs[] = {{"none", MemoryKind::kNone},
                             {"int8", MemoryKind::kResidual},
                             {"topk:ratio=0.05", MemoryKind::kResidual},
                             {"powersgd:rank=2", MemoryKind::kResidual}};

// The flat default for the codec, on the same inputs.
const CompressedAlgorithmInfo& flat_for(const CompressedRanks& ranks, size_t count) {
  return *default_compressed_algorithm(ranks.codec(0), count, 4);
}

TEST(Hierarchical, EveryLayoutAndCodecWithinTheBoundAndCloseToFlat) {
  for (const Layout& layout : layouts()) {
    for (const CodecCase& codec : kCodecs) {
      const int n = static_cast<int>(layout.hosts.size());
      CompressedRanks nodes(n, codec.spec, codec.memory, layout.hosts);
      CompressedRanks flat(n, codec.spec, codec.memory);
      ASSERT_TRUE(nodes.ok() && flat.ok()) << nodes.error() << flat.error();
      for (size_t count : {size_t{1001}, size_t{65536}}) {
        SCOPED_TRACE(std::string(layout.name) + " " + codec.spec + " " + std::to_string(count));
        const test::CaseReport hierarchical_report =
            run_and_check(nodes, hierarchical(), DType::kFloat32, count, 17);
        const test::CaseReport flat_report =
            run_and_check(flat, flat_for(flat, count), DType::kFloat32, count, 17);
        // Both within their bounds of the same exact sum.
        EXPECT_LE(hierarchical_report.max_error, hierarchical_report.bound);
        EXPECT_LE(flat_report.max_error, flat_report.bound);
        if (std::string(codec.spec) == "none") {
          EXPECT_LT(hierarchical_report.max_error, 1e-5);
          EXPECT_LT(flat_report.max_error, 1e-5);
        }
      }
    }
  }
}

TEST(Hierarchical, DtypesAverageAndInPlace) {
  CompressedRanks ranks(4, "int8", MemoryKind::kResidual, {"a", "a", "b", "b"});
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    run_and_check(ranks, hierarchical(), dtype, 5000, 1);
    run_and_check(ranks, hierarchical(), dtype, 5000, 2, 0.25);
    run_and_check(ranks, hierarchical(), dtype, 5000, 3, 1.0, true);
  }
  run_and_check(ranks, hierarchical(), DType::kFloat32, 0, 4);
}

TEST(Hierarchical, OnlyLeadersSendCompressedAndMembersSendTheirTensor) {
  // {a, a, b, b}: members (positions 1 and 3) send their fp32 tensor to their leader and nothing
  // else; the leaders' compressed exchange is between the two nodes only.
  const size_t count = 1 << 16;
  CompressedRanks ranks(4, "int8", MemoryKind::kNone, {"a", "a", "b", "b"});
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  run_and_check(ranks, hierarchical(), DType::kFloat32, count, 5);
  EXPECT_EQ(ranks.counters(1).wire_bytes, count * 4);
  EXPECT_EQ(ranks.counters(3).wire_bytes, count * 4);
  // A leader: its member's result (fp32) plus the two-node sra of int8 (about 0.26 of the tensor).
  const double compressed = double(ranks.counters(0).wire_bytes) - count * 4.0;
  EXPECT_LT(compressed, 0.27 * count * 4);
  EXPECT_GT(compressed, 0.25 * count * 4);
}

}  // namespace
}  // namespace terse
