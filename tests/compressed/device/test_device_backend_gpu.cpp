// The CUDA execution backend with the real kernels, on a GPU (they skip, saying so, without
// one): scatter-reduce-allgather on device buffers, 2 to 4 ranks as threads on one GPU, against
// the reference model of the host path, for every dense codec; the sparsifiers through sparse
// allgather (Random-K with a shared seed through its own algorithm), bit for bit; PowerSGD
// within GEMM rounding; the integer quantizers' fused compensated encode against the CPU's; and
// only encoded messages over PCIe. A codec whose kernels match its CPU code bit for bit must
// match the model exactly; one that does not (a GPU session finds which) must still be within
// its stated bound, and says how many elements differ.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "common/result.h"
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

// `algorithm` with `spec` on `n` ranks with the real kernels, three steps (the last an
// average) in fp32 and three in bf16, each dtype a sequence of its own ranks (the model keeps
// one residual per rank, a device rank one per tensor key and dtype), residuals carried: equal
// to the host path's model, or where a kernel's arithmetic differs and `bit_for_bit` is false,
// within the stated bound and identical on every rank.
void expect_matches_the_host_path(const std::string& algorithm, const std::string& spec, int n,
                                  bool bit_for_bit = false) {
  const CompressedAlgorithmInfo& info = *find_compressed_algorithm(algorithm);
  std::unique_ptr<Codec> codec = make_codec(spec);
  const MemoryKind memory = default_memory_kind(*codec);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    DeviceRanks ranks(n, spec, memory, real_compute);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_algorithm(algorithm);
    ranks.set_piece_bytes(64 << 10);
    for (uint64_t step = 0; step < 3; ++step) {
      const double scale = step == 2 ? 1.0 / n : 1.0;
      const size_t count = 100003;
      std::vector<std::vector<uint8_t>> inputs, outputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 70 + step), dtype));
      }
      std::vector<std::string> errors;
      ranks.allreduce(dtype, count, inputs, scale, step, &outputs, &errors);
      const std::string label = algorithm + " " + spec + " n=" + std::to_string(n) + " " +
                                dtype_name(dtype) + " step=" + std::to_string(step);
      for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
      const model::Comparison exact = model::compare_all(ranks.expected(), dtype, outputs);
      if (bit_for_bit) {
        EXPECT_EQ(exact.mismatches, 0u) << label << ": " << exact.first;
        continue;
      }
      if (exact.mismatches == 0) continue;
      std::cout << label << ": " << exact.mismatches
                << " elements differ from the host path's model (max " << exact.max_error
                << "); held to the stated bound\n";
      const test::CaseReport report = test::check_case(label, *codec, info.lossy_steps(n), dtype,
                                                       count, inputs, outputs, scale);
      EXPECT_EQ(report.outside, 0u) << label;
      EXPECT_TRUE(report.identical) << label << ": ranks disagree";
    }
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

// The sparsifiers on the real kernels through the algorithm the planner's default picks for
// them, bit for bit: the selection kernels keep the elements the CPU keeps
// (sparse_select_kernels.h), kept values are copied exactly, and the scatter-adds run in the
// host path's order. Top-K also through the re-encoding algorithms.
TEST(DeviceBackendGpu, EverySparsifierMatchesTheHostPathBitForBit) {
  skip_without_gpu();
  if (IsSkipped()) return;
  for (const std::string spec : {"topk:ratio=0.01,method=exact", "topk:ratio=0.01,method=sampled",
                                 "topk:k=500", "threshold:threshold=1.5", "dgc:ratio=0.01",
                                 "randomk:ratio=0.01,shared_seed=false,unbiased=false"}) {
    for (int n : {2, 3, 4}) expect_matches_the_host_path("sparse_allgather", spec, n, true);
  }
  for (const std::string spec : {"randomk:ratio=0.01", "randomk:ratio=0.01,unbiased=false"}) {
    for (int n : {2, 3, 4}) expect_matches_the_host_path("randomk", spec, n, true);
  }
  for (const std::string algorithm : {"sra", "ring", "recursive_doubling", "tree"}) {
    expect_matches_the_host_path(algorithm, "topk:k=500,method=exact", 3, true);
  }
}

// PowerSGD on the real kernels: cuBLAS's GEMMs sum in another order than the host's, so P and Q
// differ from the host path's in the last bits (codecs/powersgd.h); held to the model's
// tolerance, or else to the stated bound, every rank identical.
TEST(DeviceBackendGpu, PowerSgdMatchesTheHostPathWithinGemmRounding) {
  skip_without_gpu();
  if (IsSkipped()) return;
  for (const std::string spec : {"powersgd:rank=4", "powersgd:rank=2,iterations=2"}) {
    for (int n : {2, 3, 4}) expect_matches_the_host_path("powersgd", spec, n);
  }
}

// A sparse message decoded on the device with its host bytes (DecodeContext::host_message, as
// the backend decodes every received message): indices validated on the host, so a bad one is
// refused before anything is enqueued and the output is untouched; a good one decodes as on the
// CPU, accumulating.
TEST(DeviceBackendGpu, SparseDecodeValidatesTheHostBytes) {
  skip_without_gpu();
  if (IsSkipped()) return;
  const size_t count = 10007;
  std::unique_ptr<Codec> codec = make_codec("topk:k=100,method=exact");
  const std::vector<float> input = test::make_rank_input(2, count, 11);
  const size_t capacity = codec->max_encoded_bytes(count, DType::kFloat32);
  std::vector<uint8_t> message(capacity);
  size_t bytes = 0;
  ASSERT_EQ(codec->encode(input.data(), count, DType::kFloat32, EncodeContext{}, message.data(),
                          capacity, &bytes),
            ncclSuccess);
  message.resize(bytes);
  std::vector<float> base(count, 0.25f), cpu = base;
  ASSERT_EQ(codec->decode(message.data(), bytes, cpu.data(), count, DType::kFloat32, true,
                          DecodeContext{}),
            ncclSuccess);
  cudaStream_t stream = nullptr;
  void *d_message = nullptr, *d_output = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_message, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_output, count * sizeof(float)), cudaSuccess);
  DecodeContext device;
  device.memory = Memory::kDevice;
  device.stream = stream;
  const auto decode_on_device = [&](const std::vector<uint8_t>& host, std::vector<float>* out) {
    cudaMemcpy(d_output, base.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_message, host.data(), bytes, cudaMemcpyHostToDevice);
    device.host_message = host.data();
    const ncclResult_t result =
        codec->decode(d_message, bytes, d_output, count, DType::kFloat32, true, device);
    out->assign(count, 0.0f);
    cudaMemcpyAsync(out->data(), d_output, count * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    return result;
  };
  std::vector<float> gpu;
  ASSERT_EQ(decode_on_device(message, &gpu), ncclSuccess) << last_error();
  EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), count * sizeof(float)), 0);
  std::vector<uint8_t> bad = message;
  const uint32_t out_of_range = static_cast<uint32_t>(count);
  std::memcpy(bad.data() + 32 + 50 * sizeof(uint32_t), &out_of_range, sizeof(out_of_range));
  EXPECT_EQ(decode_on_device(bad, &gpu), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("index"), std::string::npos) << last_error();
  EXPECT_EQ(gpu, base);
  cudaFree(d_message);
  cudaFree(d_output);
  cudaStreamDestroy(stream);
}

// Sparse allgather of Top-K (1%, fixed k: one whole-tensor message per rank) on 4 ranks and a
// 16M-element tensor: each rank copies its one message to the host and the four messages it
// decodes to the device, a fiftieth of the tensor's bytes each way.
TEST(DeviceBackendGpu, SparseAllgatherMovesOnlyMessagesOverPcie) {
  skip_without_gpu();
  if (IsSkipped()) return;
  const int n = 4;
  const size_t count = size_t{16} << 20, k = count / 100;
  const std::string spec = "topk:k=" + std::to_string(k) + ",method=exact";
  DeviceRanks ranks(n, spec, MemoryKind::kResidual, real_compute);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm("sparse_allgather");
  std::vector<std::vector<uint8_t>> inputs, outputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 5), DType::kFloat32));
  }
  std::vector<std::string> errors;
  ranks.allreduce(DType::kFloat32, count, inputs, 1.0, 0, &outputs, &errors);
  const uint64_t message = 32 + k * (4 + sizeof(float));  // header, k fp32 (index, value) pairs
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "");
    std::cout << "rank " << r << ": " << ranks.counters(r).pcie_bytes_to_host << " bytes to the "
              << "host, " << ranks.counters(r).pcie_bytes_to_device << " to the device, tensor "
              << count * sizeof(float) << " bytes\n";
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_host, message);
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_device, n * message);
  }
  EXPECT_EQ(model::compare_all(ranks.expected(), DType::kFloat32, outputs).mismatches, 0u);
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
