// The decode-add-re-encode algorithms (compressed ring, recursive doubling, binary tree) on
// device buffers through the CUDA execution backend, against the fake CUDA runtime with the
// kernels emulated on the stream (as test_backend_ordering.cpp does for scatter-reduce-allgather):
// results and residuals equal the reference model (model/) bit for bit over several steps
// with error feedback, and each rank copies exactly the encoded messages its algorithm's steps
// name between device and host (model::device_pcie_bytes), never the tensor.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs/codec_registry.h"
#include "common/result.h"
#include "compressed_test_support.h"
#include "device_ranks.h"
#include "emulated_compute.h"
#include "model/pcie_bytes.h"

namespace terse {
namespace {

using test::DeviceRanks;
using test::EmulatedCompute;

// Three steps of `algorithm` per codec, rank count and dtype, residuals carried from step to step
// (the last step an average): every rank's result and residual against the model's.
void expect_model_bit_for_bit(const std::string& algorithm) {
  struct Case {
    const char* codec;
    MemoryKind memory;
  };
  // int8 with a residual takes the fused compensate+encode kernel for the rank's own
  // contribution; int4 stochastic draws per-range seeds; fp16 keeps no residual.
  for (const Case& c :
       {Case{"int8", MemoryKind::kResidual},
        Case{"int4:rounding=stochastic", MemoryKind::kResidual}, Case{"fp16", MemoryKind::kNone}}) {
    // 3 ranks: the ring's odd blocks, a fold in recursive doubling, a root with two leaves;
    // 4: two doubling rounds, a tree two levels deep. Residuals are carried within one dtype.
    for (auto [n, dtype] : {std::pair{2, DType::kFloat32}, std::pair{3, DType::kFloat32},
                            std::pair{4, DType::kBFloat16}}) {
      std::vector<EmulatedCompute*> computes;
      DeviceRanks ranks(n, c.codec, c.memory, [&] {
        auto compute = std::make_unique<EmulatedCompute>();
        computes.push_back(compute.get());
        return compute;
      });
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      ranks.set_algorithm(algorithm);
      ranks.set_piece_bytes(1024);  // the ring: several pieces per block
      for (uint64_t step = 0; step < 3; ++step) {
        const double scale = step == 2 ? 1.0 / n : 1.0;
        const size_t count = 1001;
        std::vector<std::vector<uint8_t>> inputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 40 + step), dtype));
        }
        std::vector<std::vector<uint8_t>> outputs;
        std::vector<std::string> errors;
        ranks.allreduce(dtype, count, inputs, scale, step, &outputs, &errors);
        const std::string label = algorithm + " " + c.codec + " n=" + std::to_string(n) + " " +
                                  dtype_name(dtype) + " step=" + std::to_string(step);
        for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
        const model::Comparison results = model::compare_all(ranks.expected(), dtype, outputs);
        EXPECT_EQ(results.mismatches, 0u) << label << ": " << results.first;
        for (int r = 0; r < n; ++r) {
          const model::Comparison residual =
              model::compare_residual(ranks.reference().residual(r), ranks.residual(r), 0);
          EXPECT_EQ(residual.mismatches, 0u) << label << " rank " << r << ": " << residual.first;
        }
      }
      for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "") << c.codec;
    }
  }
}

// One int8 call of `algorithm` on 3 and 4 ranks, one piece per block: each rank's PCIe bytes
// are exactly its encodes to the host and its decodes to the device, below what staging copies
// (the whole tensor each way). Not far below for whole-tensor algorithms: recursive doubling
// copies a whole message out and two back each round, the tree a rank's children's and the
// down message.
void expect_only_messages_cross_pcie(const std::string& algorithm) {
  const size_t count = 30001;  // blocks of unequal sizes
  std::string spec;
  CodecParams params;
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(parse_codec_spec("int8", &spec, &params), ncclSuccess);
  ASSERT_EQ(create_codec(spec, params, &codec), ncclSuccess) << last_error();
  for (int n : {3, 4}) {
    DeviceRanks ranks(n, "int8", MemoryKind::kResidual,
                      [] { return std::make_unique<EmulatedCompute>(); });
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_algorithm(algorithm);
    ranks.set_piece_bytes(size_t{1} << 20);
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 9), DType::kFloat32));
    }
    std::vector<std::string> errors;
    ranks.allreduce(DType::kFloat32, count, inputs, 1.0, 0, &outputs, &errors);
    EXPECT_EQ(model::compare_all(ranks.expected(), DType::kFloat32, outputs).mismatches, 0u);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errors[static_cast<size_t>(r)], "");
      const model::PcieBytes expected = model::device_pcie_bytes(algorithm, *codec, count, n, r);
      const std::string label =
          algorithm + " n=" + std::to_string(n) + " rank " + std::to_string(r);
      EXPECT_EQ(ranks.counters(r).pcie_bytes_to_host, expected.to_host) << label;
      EXPECT_EQ(ranks.counters(r).pcie_bytes_to_device, expected.to_device) << label;
      EXPECT_GT(expected.to_host, 0u) << label;
      EXPECT_LT(expected.to_host + expected.to_device, 2 * count * sizeof(float)) << label;
    }
  }
}

TEST(DeviceRing, MatchesTheModelBitForBit) {
  expect_model_bit_for_bit("ring");
}
TEST(DeviceRing, OnlyEncodedMessagesCrossPcie) {
  expect_only_messages_cross_pcie("ring");
}

TEST(DeviceRecursiveDoubling, MatchesTheModelBitForBit) {
  expect_model_bit_for_bit("recursive_doubling");
}
TEST(DeviceRecursiveDoubling, OnlyEncodedMessagesCrossPcie) {
  expect_only_messages_cross_pcie("recursive_doubling");
}

TEST(DeviceTree, MatchesTheModelBitForBit) {
  expect_model_bit_for_bit("tree");
}
TEST(DeviceTree, OnlyEncodedMessagesCrossPcie) {
  expect_only_messages_cross_pcie("tree");
}

}  // namespace
}  // namespace terse
