// The hierarchical and rail algorithms on device buffers through the CUDA execution backend,
// against the fake CUDA runtime with the kernels emulated on the stream: ranks as threads put on
// emulated nodes by the group's host identities (PeerGroup::hosts), results and residuals equal
// to the reference model (model/) bit for bit over three steps with error feedback (the
// last an average), and each rank's PCIe bytes exactly the inner algorithm's encoded messages
// plus the tensor bytes its intra-node phases exchange through host memory
// (model::grouped_device_pcie_bytes).
#include <gtest/gtest.h>

#include <memory>
#include <string>
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

struct Layout {
  std::vector<std::string> hosts;
  const char* inner;
  DType dtype;
};

void expect_model_and_pcie(const std::string& algorithm, const Layout& layout) {
  const int n = static_cast<int>(layout.hosts.size());
  const size_t count = 1001;  // chunks and blocks of unequal sizes
  std::string name;
  CodecParams params;
  std::unique_ptr<Codec> int8;
  ASSERT_EQ(parse_codec_spec("int8", &name, &params), ncclSuccess);
  ASSERT_EQ(create_codec(name, params, &int8), ncclSuccess) << last_error();
  std::vector<EmulatedCompute*> computes;
  DeviceRanks ranks(n, "int8", MemoryKind::kResidual, [&] {
    auto compute = std::make_unique<EmulatedCompute>();
    computes.push_back(compute.get());
    return compute;
  });
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm(algorithm);
  ranks.set_inner(layout.inner);
  ranks.set_hosts(layout.hosts);
  std::vector<uint64_t> to_host(static_cast<size_t>(n), 0), to_device(static_cast<size_t>(n), 0);
  for (uint64_t step = 0; step < 3; ++step) {
    const double scale = step == 2 ? 1.0 / n : 1.0;
    std::vector<std::vector<uint8_t>> inputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 60 + step), layout.dtype));
    }
    std::vector<std::vector<uint8_t>> outputs;
    std::vector<std::string> errors;
    ranks.allreduce(layout.dtype, count, inputs, scale, step, &outputs, &errors);
    const std::string label = algorithm + "/" + layout.inner + " n=" + std::to_string(n) + " " +
                              dtype_name(layout.dtype) + " step=" + std::to_string(step);
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
    const model::Comparison results = model::compare_all(ranks.expected(), layout.dtype, outputs);
    EXPECT_EQ(results.mismatches, 0u) << label << ": " << results.first;
    for (int r = 0; r < n; ++r) {
      const model::Comparison residual =
          model::compare_residual(ranks.reference().residual(r), ranks.residual(r), 0);
      EXPECT_EQ(residual.mismatches, 0u) << label << " rank " << r << ": " << residual.first;
      const model::PcieBytes expected = model::grouped_device_pcie_bytes(
          algorithm, layout.inner, *int8, count, dtype_size(layout.dtype), layout.hosts, r);
      const CompressionCounters& counters = ranks.counters(r);
      EXPECT_EQ(counters.pcie_bytes_to_host - to_host[static_cast<size_t>(r)], expected.to_host)
          << label << " rank " << r;
      EXPECT_EQ(counters.pcie_bytes_to_device - to_device[static_cast<size_t>(r)],
                expected.to_device)
          << label << " rank " << r;
      to_host[static_cast<size_t>(r)] = counters.pcie_bytes_to_host;
      to_device[static_cast<size_t>(r)] = counters.pcie_bytes_to_device;
    }
  }
  for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "");
}

// Two nodes of two (sra between the leaders), and nodes of three and two in bf16 (recursive
// doubling between them; the members' 16-bit tensors widened on the leader's device).
TEST(DeviceHierarchical, MatchesTheModelAndCopiesMessagesAndNodeTraffic) {
  expect_model_and_pcie("hierarchical", Layout{{"a", "a", "b", "b"}, "sra", DType::kFloat32});
  expect_model_and_pcie("hierarchical",
                        Layout{{"a", "a", "b", "a", "b"}, "recursive_doubling", DType::kBFloat16});
}

// Rails of two nodes of two (sra along each rail) and of three (the tree), fp32 and bf16.
TEST(DeviceRail, MatchesTheModelAndCopiesMessagesAndNodeTraffic) {
  expect_model_and_pcie("rail", Layout{{"a", "a", "b", "b"}, "sra", DType::kFloat32});
  expect_model_and_pcie("rail", Layout{{"a", "b", "a", "b", "a", "b"}, "tree", DType::kBFloat16});
}

}  // namespace
}  // namespace terse
