// The CUDA execution backend with the real kernels, on a GPU (they skip, saying so, without
// one): scatter-reduce-allgather on device buffers, 2 to 4 ranks as threads on one GPU, against
// the reference model of the host path, for every dense codec; and only encoded messages over
// PCIe. A codec whose kernels match its CPU code bit for bit must match the model exactly; one
// that does not (a GPU session finds which) must still be within its stated bound, and says how
// many elements differ.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"
#include "device_ranks.h"

namespace terse {
namespace {

using test::DeviceRanks;

void skip_without_gpu() {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no CUDA device: "
                 << (error != cudaSuccess ? cudaGetErrorString(error) : "none present");
  }
}

std::unique_ptr<DeviceCompute> real_compute() {
  std::unique_ptr<DeviceCompute> compute;
  EXPECT_EQ(make_cuda_compute(&compute), ncclSuccess);
  return compute;
}

std::unique_ptr<Codec> make_codec(const std::string& spec) {
  std::string name;
  CodecParams params;
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(parse_codec_spec(spec, &name, &params), ncclSuccess);
  EXPECT_EQ(create_codec(name, params, &codec), ncclSuccess);
  return codec;
}

TEST(DeviceBackendGpu, EveryDenseCodecMatchesTheHostPath) {
  skip_without_gpu();
  if (IsSkipped()) return;
  const CompressedAlgorithmInfo& sra = *find_compressed_algorithm("sra");
  for (const std::string& spec : test::reencoding_codecs()) {
    std::unique_ptr<Codec> codec = make_codec(spec);
    if (codec->family() != CodecFamily::kDense) continue;
    const MemoryKind memory = default_memory_kind(*codec);
    for (int n : {2, 3, 4}) {
      DeviceRanks ranks(n, spec, memory, real_compute);
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      ranks.set_piece_bytes(64 << 10);
      for (uint64_t step = 0; step < 3; ++step) {
        const DType dtype = step == 1 ? DType::kBFloat16 : DType::kFloat32;
        const double scale = step == 2 ? 1.0 / n : 1.0;
        const size_t count = 100003;
        std::vector<std::vector<uint8_t>> inputs, outputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 70 + step), dtype));
        }
        std::vector<std::string> errors;
        ranks.allreduce(dtype, count, inputs, scale, step, &outputs, &errors);
        const std::string label =
            spec + " n=" + std::to_string(n) + " step=" + std::to_string(step);
        for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
        const model::Comparison exact = model::compare_all(ranks.expected(), dtype, outputs);
        if (exact.mismatches == 0) continue;
        std::cout << label << ": " << exact.mismatches
                  << " elements differ from the host path's model (max " << exact.max_error
                  << "); held to the stated bound\n";
        const test::CaseReport report = test::check_case(label, *codec, sra.lossy_steps(n), dtype,
                                                         count, inputs, outputs, scale);
        EXPECT_EQ(report.outside, 0u) << label;
        EXPECT_TRUE(report.identical) << label << ": ranks disagree";
      }
    }
  }
}

TEST(DeviceBackendGpu, OnlyEncodedMessagesCrossPcie) {
  skip_without_gpu();
  if (IsSkipped()) return;
  const int n = 4;
  const size_t count = size_t{16} << 20;
  DeviceRanks ranks(n, "int8", MemoryKind::kResidual, real_compute);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(count * sizeof(float));  // one piece per chunk: the layout's counts
  std::vector<std::vector<uint8_t>> inputs, outputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 3), DType::kFloat32));
  }
  std::vector<std::string> errors;
  ranks.allreduce(DType::kFloat32, count, inputs, 1.0, 0, &outputs, &errors);
  std::unique_ptr<Codec> codec = make_codec("int8");
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "");
    const test::PcieBytes expected = test::expected_pcie_bytes(*codec, count, n, r);
    const uint64_t moved =
        ranks.counters(r).pcie_bytes_to_host + ranks.counters(r).pcie_bytes_to_device;
    std::cout << "rank " << r << ": " << moved << " bytes over PCIe, "
              << ranks.counters(r).wire_bytes << " on the wire, tensor " << count * sizeof(float)
              << " bytes (staging moves " << 2 * count * sizeof(float) << ")\n";
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_host, expected.to_host);
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_device, expected.to_device);
  }
  EXPECT_EQ(model::compare_all(ranks.expected(), DType::kFloat32, outputs).mismatches, 0u);
}

}  // namespace
}  // namespace terse
