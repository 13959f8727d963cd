// Every compressed algorithm with every codec it accepts, on 2, 3, 4, 5 and 8 ranks (threads over
// UCX), against the reference model (model/): three calls in a row with error feedback
// carried between them, every rank's result equal to the model's (bit for bit, or within the
// rounding the model states for exact sums done in another order), every residual too. 16-bit
// tensors and averages as well; and hierarchical calls on several node layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::ModelCheck;

const CompressedAlgorithmInfo& algorithm(const char* name) {
  return *find_compressed_algorithm(name);
}

void expect_matches_model(CompressedRanks& ranks, const char* name, const std::string& codec,
                          DType dtype, size_t count, double result_scale = 1.0) {
  const ModelCheck check =
      test::run_model_steps(ranks, algorithm(name), dtype, count, 3, 101, result_scale);
  EXPECT_TRUE(check.ok()) << name << " " << codec << " n=" << ranks.nranks() << " "
                          << dtype_name(dtype) << " x " << count << ": " << check.first;
}

class ExactModel : public ::testing::TestWithParam<int> {};

// Small pieces, so that the pipelined algorithms cut chunks and blocks into several pieces.
TEST_P(ExactModel, ReencodingAlgorithmsEveryCodec) {
  CompressedRanks ranks(GetParam(), "none", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(2048);
  for (const char* name : {"sra", "ring", "recursive_doubling", "tree"}) {
    for (const std::string& codec : test::reencoding_codecs()) {
      ranks.use_codec(codec, MemoryKind::kResidual);
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      expect_matches_model(ranks, name, codec, DType::kFloat32, 5003);
    }
    ranks.use_codec("int8:rounding=stochastic", MemoryKind::kResidual);
    expect_matches_model(ranks, name, "int8 stochastic", DType::kBFloat16, 3001, 0.25);
    ranks.use_codec("qsgd", MemoryKind::kNone);
    expect_matches_model(ranks, name, "qsgd, memory none", DType::kFloat16, 3001);
    // fp8 tensors (issue 14): computed in fp32, the result stored once in the tensor's type.
    ranks.use_codec("mxfp8", MemoryKind::kResidual);
    expect_matches_model(ranks, name, "mxfp8, fp8 e4m3", DType::kFloat8E4M3, 3001);
    ranks.use_codec("int8", MemoryKind::kResidual);
    expect_matches_model(ranks, name, "int8, fp8 e5m2", DType::kFloat8E5M2, 3001, 0.25);
  }
}

TEST_P(ExactModel, SparseAllgatherEveryCodecAndTheDenseSwitch) {
  CompressedRanks ranks(GetParam(), "none", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  struct Case {
    const char* codec;
    MemoryKind memory;
  };
  // topk:ratio=0.5 makes the union dense on every rank count: the dense exchange runs.
  for (const Case& c : {Case{"topk:ratio=0.05", MemoryKind::kResidual},
                        Case{"topk:ratio=0.05,method=exact", MemoryKind::kResidual},
                        Case{"topk:ratio=0.5", MemoryKind::kResidual},
                        Case{"randomk:ratio=0.05,shared_seed=false", MemoryKind::kNone},
                        Case{"threshold:threshold=0.8", MemoryKind::kResidual},
                        Case{"dgc:ratio=0.05", MemoryKind::kMomentum},
                        Case{"dgc:ratio=0.05,warmup_steps=4", MemoryKind::kMomentum}}) {
    ranks.use_codec(c.codec, c.memory);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    expect_matches_model(ranks, "sparse_allgather", c.codec, DType::kFloat32, 4099);
    expect_matches_model(ranks, "sparse_allgather", c.codec, DType::kBFloat16, 999, 0.5);
  }
}

// Small pieces, so that top-k by ratio selects and sends in several chunks (chunks of 16 pieces:
// 1024 elements at 256-byte pieces, 64 chunks at most), and the codecs that send their whole
// tensor whatever the pieces beside it.
TEST_P(ExactModel, SparseAllgatherInChunks) {
  CompressedRanks ranks(GetParam(), "none", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  for (size_t piece : {size_t{256}, size_t{4}}) {
    ranks.set_piece_bytes(piece);
    for (const char* codec : {"topk:ratio=0.05", "topk:ratio=0.01,method=exact", "topk:k=40",
                              "threshold:threshold=0.8"}) {
      ranks.use_codec(codec, MemoryKind::kResidual);
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      expect_matches_model(ranks, "sparse_allgather", codec, DType::kFloat32, 4099);
      expect_matches_model(ranks, "sparse_allgather", codec, DType::kBFloat16, 3001, 0.5);
    }
    ranks.use_codec("topk:ratio=0.05", MemoryKind::kNone);
    expect_matches_model(ranks, "sparse_allgather", "topk, memory none", DType::kFloat16, 5000);
  }
}

TEST_P(ExactModel, SharedSeedRandomK) {
  CompressedRanks ranks(GetParam(), "randomk:ratio=0.05", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  expect_matches_model(ranks, "randomk", "randomk", DType::kFloat32, 4099);
  expect_matches_model(ranks, "randomk", "randomk", DType::kFloat16, 2000, 0.25);
  ranks.use_codec("randomk:ratio=0.1,unbiased=false", MemoryKind::kResidual);
  expect_matches_model(ranks, "randomk", "randomk biased with feedback", DType::kFloat32, 999);
}

TEST_P(ExactModel, PowerSgdAndItsDensePlans) {
  CompressedRanks ranks(GetParam(), "powersgd:rank=2", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  expect_matches_model(ranks, "powersgd", "powersgd rank 2", DType::kFloat32, 64 * 48);
  ranks.use_codec("powersgd:rank=3,iterations=2", MemoryKind::kResidual);
  expect_matches_model(ranks, "powersgd", "powersgd rank 3, 2 iterations", DType::kBFloat16,
                       100 * 30);
  ranks.use_codec("powersgd:rank=2,warm_start=false", MemoryKind::kNone);
  expect_matches_model(ranks, "powersgd", "powersgd cold, memory none", DType::kFloat32, 40 * 40);
  // A prime count: a 1 x n view, sent dense.
  ranks.use_codec("powersgd", MemoryKind::kResidual);
  expect_matches_model(ranks, "powersgd", "powersgd dense plan", DType::kFloat32, 1009);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExactModel, ::testing::Values(2, 3, 4, 5, 8));

// Hierarchical: exact node sums, then the default algorithm among the leaders (tree, recursive
// doubling or sra by size for quantizers; sparse allgather; PowerSGD), on uneven layouts.
TEST(ExactModelHierarchical, EveryInnerAlgorithmOnUnevenNodes) {
  const std::vector<std::vector<std::string>> layouts = {
      {"a", "a", "b", "b"}, {"a", "b", "a", "c", "c"}, {"a", "a", "a", "b", "c", "c", "c", "d"}};
  for (const std::vector<std::string>& hosts : layouts) {
    CompressedRanks ranks(static_cast<int>(hosts.size()), "int8", MemoryKind::kResidual, hosts);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_piece_bytes(4096);
    for (size_t count : {size_t{1001}, size_t{20000}, size_t{70001}}) {
      expect_matches_model(ranks, "hierarchical", "int8", DType::kFloat32, count);
    }
    expect_matches_model(ranks, "hierarchical", "int8", DType::kFloat16, 20000, 0.125);
    for (const char* codec : {"topk:ratio=0.05", "sign", "powersgd:rank=2"}) {
      ranks.use_codec(codec, MemoryKind::kResidual);
      expect_matches_model(ranks, "hierarchical", codec, DType::kFloat32, 60 * 50);
    }
  }
}

// Rails: exact node sums of each rank's chunk, the default algorithm for the chunk over local
// rank i of every node, allgathered inside the node; on even layouts of 2, 3 and 4 nodes, and an
// uneven one where the inner algorithm runs flat instead.
TEST(ExactModelRail, EveryInnerAlgorithmOnEvenNodes) {
  const std::vector<std::vector<std::string>> layouts = {{"a", "a", "b", "b"},
                                                         {"a", "b", "c", "a", "b", "c"},
                                                         {"a", "a", "b", "b", "c", "c", "d", "d"},
                                                         {"a", "a", "a", "b"}};
  for (const std::vector<std::string>& hosts : layouts) {
    CompressedRanks ranks(static_cast<int>(hosts.size()), "int8", MemoryKind::kResidual, hosts);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_piece_bytes(4096);
    for (size_t count : {size_t{1}, size_t{1001}, size_t{20000}, size_t{140001}}) {
      expect_matches_model(ranks, "rail", "int8", DType::kFloat32, count);
    }
    expect_matches_model(ranks, "rail", "int8", DType::kFloat16, 20000, 0.125);
    expect_matches_model(ranks, "rail", "int8", DType::kBFloat16, 20000, 0.125);
    for (const char* codec : {"topk:ratio=0.05", "sign", "randomk:ratio=0.05,unbiased=false"}) {
      ranks.use_codec(codec, MemoryKind::kResidual);
      expect_matches_model(ranks, "rail", codec, DType::kFloat32, 60 * 50);
    }
  }
}

}  // namespace
}  // namespace terse
