// PowerSGD on device buffers through the CUDA execution backend, against the fake CUDA runtime
// with the kernels emulated on the stream (the emulated GEMMs are the host's, so the device path
// differs from the host path in where things run, not in arithmetic): results and residuals
// within the reference model's tolerance (it computes in double precision) over three steps
// with the warm start carried, every rank holding the same bits, and only the factors crossing
// PCIe, counted from the algorithm's documented steps: per power iteration P and this rank's
// Q_local to the host, the prepared Q and the summed P to the device; then the orthogonalised
// P to the host and the summed Q to the device. A tensor the plan sends dense crosses whole.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs/powersgd.h"
#include "compressed_test_support.h"
#include "device_ranks.h"
#include "emulated_compute.h"

namespace terse {
namespace {

using test::DeviceRanks;
using test::EmulatedCompute;

// `spec` on `n` ranks, three steps of `count` elements of `dtype` (the last an average); each
// rank's PCIe bytes per call are `to_host` and `to_device`.
void expect_powersgd(const std::string& spec, int n, DType dtype, size_t count, uint64_t to_host,
                     uint64_t to_device) {
  std::vector<EmulatedCompute*> computes;
  DeviceRanks ranks(n, spec, MemoryKind::kResidual, [&] {
    auto compute = std::make_unique<EmulatedCompute>();
    computes.push_back(compute.get());
    return compute;
  });
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm("powersgd");
  for (uint64_t step = 0; step < 3; ++step) {
    const double scale = step == 2 ? 1.0 / n : 1.0;
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 90 + step), dtype));
    }
    std::vector<std::string> errors;
    ranks.allreduce(dtype, count, inputs, scale, step, &outputs, &errors);
    const std::string label = spec + " n=" + std::to_string(n) + " " + dtype_name(dtype) +
                              " count=" + std::to_string(count) + " step=" + std::to_string(step);
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
    const model::Comparison results = model::compare_all(ranks.expected(), dtype, outputs);
    EXPECT_EQ(results.mismatches, 0u) << label << ": " << results.first;
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(outputs[static_cast<size_t>(r)], outputs[0]) << label << ": ranks disagree";
    }
    for (int r = 0; r < n; ++r) {
      const model::Comparison residual = model::compare_residual(
          ranks.reference().residual(r), ranks.residual(r), ranks.expected().residual_tolerance);
      EXPECT_EQ(residual.mismatches, 0u) << label << " rank " << r << ": " << residual.first;
      const CompressionCounters& counters = ranks.counters(r);
      EXPECT_EQ(counters.pcie_bytes_to_host, (step + 1) * to_host) << label << " rank " << r;
      EXPECT_EQ(counters.pcie_bytes_to_device, (step + 1) * to_device) << label << " rank " << r;
    }
  }
  for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "") << spec;
}

// The factors' bytes of `iterations` power iterations of rank `rank` on `count` elements, as
// the file comment counts them, from the codec's near-square view.
std::pair<uint64_t, uint64_t> factor_bytes(size_t count, int rank, int iterations) {
  PowerSgdPlan plan;
  EXPECT_EQ(plan_powersgd(count, DType::kFloat32, MatrixShape{}, rank, &plan), ncclSuccess);
  EXPECT_FALSE(plan.dense);
  const uint64_t p = plan.rows * static_cast<uint64_t>(plan.rank) * sizeof(float);
  const uint64_t q = plan.cols * static_cast<uint64_t>(plan.rank) * sizeof(float);
  const uint64_t k = static_cast<uint64_t>(iterations);
  return {k * (p + q) + p, k * (q + p) + q};
}

TEST(DevicePowerSgd, FactorsAloneCrossPcieAndTheResultIsTheModels) {
  const size_t count = 120 * 97;
  for (auto [n, dtype] : {std::pair{2, DType::kFloat32}, std::pair{3, DType::kFloat32},
                          std::pair{4, DType::kBFloat16}}) {
    const auto [to_host, to_device] = factor_bytes(count, 4, 1);
    expect_powersgd("powersgd:rank=4", n, dtype, count, to_host, to_device);
  }
  const auto [to_host, to_device] = factor_bytes(count, 2, 2);
  expect_powersgd("powersgd:rank=2,iterations=2", 3, DType::kFloat32, count, to_host, to_device);
}

// A prime count has only the 1 x n view: the plan sends it dense, an exact sum of M on the host.
TEST(DevicePowerSgd, ADenseTensorCrossesWhole) {
  const size_t count = 1009;
  const uint64_t whole = count * sizeof(float);
  expect_powersgd("powersgd:rank=4", 3, DType::kFloat32, count, whole, whole);
}

}  // namespace
}  // namespace terse
