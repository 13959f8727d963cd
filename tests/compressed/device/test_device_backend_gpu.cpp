// The CUDA execution backend with the real kernels, on a GPU (they skip, saying so, without
// one): scatter-reduce-allgather on device buffers, 2 to 4 ranks as threads on one GPU, against
// the reference model of the host path, for every dense codec; the integer quantizers' fused
// compensated encode against the CPU's; and only encoded messages over PCIe. A codec whose kernels
// match its CPU code bit for bit must match the model exactly; one that does not (a GPU session
// finds which) must still be within its stated bound, and says how many elements differ.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"
#include "device_ranks.h"
#include "model/pcie_bytes.h"

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

// `algorithm` with `spec` on `n` ranks with the real kernels, three steps (fp32, bf16, an
// fp32 average), residuals carried: equal to the host path's model, or where a kernel's
// arithmetic differs, within the stated bound and identical on every rank.
void expect_matches_the_host_path(const std::string& algorithm, const std::string& spec, int n) {
  const CompressedAlgorithmInfo& info = *find_compressed_algorithm(algorithm);
  std::unique_ptr<Codec> codec = make_codec(spec);
  const MemoryKind memory = default_memory_kind(*codec);
  DeviceRanks ranks(n, spec, memory, real_compute);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm(algorithm);
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
        algorithm + " " + spec + " n=" + std::to_string(n) + " step=" + std::to_string(step);
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
    const model::Comparison exact = model::compare_all(ranks.expected(), dtype, outputs);
    if (exact.mismatches == 0) continue;
    std::cout << label << ": " << exact.mismatches
              << " elements differ from the host path's model (max " << exact.max_error
              << "); held to the stated bound\n";
    const test::CaseReport report =
        test::check_case(label, *codec, info.lossy_steps(n), dtype, count, inputs, outputs, scale);
    EXPECT_EQ(report.outside, 0u) << label;
    EXPECT_TRUE(report.identical) << label << ": ranks disagree";
  }
}

TEST(DeviceBackendGpu, EveryDenseCodecMatchesTheHostPath) {
  skip_without_gpu();
  if (IsSkipped()) return;
  for (const std::string& spec : test::reencoding_codecs()) {
    if (make_codec(spec)->family() != CodecFamily::kDense) continue;
    for (int n : {2, 3, 4}) expect_matches_the_host_path("sra", spec, n);
  }
}

// The decode-add-re-encode algorithms on the real kernels: a fold and two doubling rounds, a
// tree one and two levels deep, the ring's pieces.
TEST(DeviceBackendGpu, RingRecursiveDoublingAndTreeMatchTheHostPath) {
  skip_without_gpu();
  if (IsSkipped()) return;
  for (const std::string algorithm : {"ring", "recursive_doubling", "tree"}) {
    for (const std::string spec : {"int8", "int4:rounding=stochastic", "fp16", "sign"}) {
      for (int n : {3, 4}) expect_matches_the_host_path(algorithm, spec, n);
    }
  }
}

// The fused device pass (Codec::encode_compensated on device memory: one kernel reads input and
// residual, encodes, writes the new residual) against the CPU's compensate-then-encode: the same
// message and the same residual, bit for bit, for every integer quantizer and input type.
TEST(DeviceBackendGpu, FusedCompensatedEncodeMatchesTheCpu) {
  skip_without_gpu();
  if (IsSkipped()) return;
  const size_t count = 100003;
  for (const std::string spec :
       {"int8", "int4", "int2", "int8:rounding=stochastic", "int4:mode=absmax"}) {
    std::unique_ptr<Codec> codec = make_codec(spec);
    ASSERT_TRUE(codec->fuses_device_compensation()) << spec;
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      const std::string label = spec + " " + dtype_name(dtype);
      const std::vector<uint8_t> input = test::to_dtype(test::make_rank_input(1, count, 9), dtype);
      std::vector<float> residual(count);
      for (size_t i = 0; i < count; ++i) residual[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
      const size_t capacity = codec->max_encoded_bytes(count, DType::kFloat32);
      EncodeContext context;
      context.seed = 0x5eed;
      std::vector<uint8_t> cpu_message(capacity);
      std::vector<float> cpu_residual = residual;
      size_t cpu_bytes = 0;
      ASSERT_EQ(codec->encode_compensated(input.data(), dtype, cpu_residual.data(), count, context,
                                          cpu_message.data(), capacity, &cpu_bytes),
                ncclSuccess)
          << label;

      cudaStream_t stream = nullptr;
      void *d_input = nullptr, *d_message = nullptr;
      float* d_residual = nullptr;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_input, input.size()), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_residual), count * sizeof(float)),
                cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_message, capacity), cudaSuccess);
      cudaMemcpy(d_input, input.data(), input.size(), cudaMemcpyHostToDevice);
      cudaMemcpy(d_residual, residual.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      EncodeContext device = context;
      device.memory = Memory::kDevice;
      device.stream = stream;
      size_t gpu_bytes = 0;
      ASSERT_EQ(codec->encode_compensated(d_input, dtype, d_residual, count, device, d_message,
                                          capacity, &gpu_bytes),
                ncclSuccess)
          << label;
      std::vector<uint8_t> gpu_message(gpu_bytes);
      std::vector<float> gpu_residual(count);
      cudaMemcpyAsync(gpu_message.data(), d_message, gpu_bytes, cudaMemcpyDeviceToHost, stream);
      cudaMemcpyAsync(gpu_residual.data(), d_residual, count * sizeof(float),
                      cudaMemcpyDeviceToHost, stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << label;
      cudaFree(d_input);
      cudaFree(d_residual);
      cudaFree(d_message);
      cudaStreamDestroy(stream);
      ASSERT_EQ(gpu_bytes, cpu_bytes) << label;
      EXPECT_TRUE(gpu_message ==
                  std::vector<uint8_t>(cpu_message.begin(), cpu_message.begin() + cpu_bytes))
          << label << ": messages differ";
      size_t differ = 0;
      for (size_t i = 0; i < count; ++i) {
        differ += std::memcmp(&gpu_residual[i], &cpu_residual[i], sizeof(float)) != 0 ? 1 : 0;
      }
      EXPECT_EQ(differ, 0u) << label << ": residual elements differ";
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
    const model::PcieBytes expected = model::device_pcie_bytes("sra", *codec, count, n, r);
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
