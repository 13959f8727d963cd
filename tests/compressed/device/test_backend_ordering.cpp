// The CUDA execution backend's ordering, copies and counters against the fake CUDA runtime
// (tests/plugin/fake_cudart: streams as threads, device memory the host cannot touch), with the
// kernels emulated on the stream (emulated_compute.h). Run by CTest with the fake first on
// LD_LIBRARY_PATH (tests/CMakeLists.txt); on a real GPU it runs too (the kernels are still the
// emulated ones, the runtime the real one).
//
// What it shows: a device-buffer scatter-reduce-allgather equals the reference model bit for bit
// (results, residuals, owner residuals) over several steps, with the input written and the output
// read by the caller's own stream work around the call; only encoded messages cross to the host
// and back (the PCIe counters, from the layout); a message is never handed to the algorithm
// before its copy to the host has run, and encoding it never waits for the stream; a decode
// follows the stream's earlier work and precedes its later work; a bad message is refused on the
// host before anything touches the output.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/cuda_backend.h"
#include "common/result.h"
#include "compressed_test_support.h"
#include "device_ranks.h"
#include "emulated_compute.h"
#include "model/pcie_bytes.h"

namespace terse {
namespace {

using test::DeviceRanks;
using test::EmulatedCompute;

std::unique_ptr<Codec> make_codec(const std::string& spec) {
  std::string name;
  CodecParams params;
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(parse_codec_spec(spec, &name, &params), ncclSuccess);
  EXPECT_EQ(create_codec(name, params, &codec), ncclSuccess) << last_error();
  return codec;
}

// Holds a stream at this point until open(): cuStreamWaitValue32 on a host word.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &function, 11070, cudaEnableDefault,
                                     &status);
    ok_ = function != nullptr && status == cudaDriverEntryPointSuccess;
    if (!ok_) return;
    auto wait = reinterpret_cast<PFN_cuStreamWaitValue32_v11070>(function);
    ok_ = wait(reinterpret_cast<CUstream>(stream),
               reinterpret_cast<CUdeviceptr>(const_cast<uint32_t*>(&flag_)), 1,
               CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS;
  }
  bool ok() const { return ok_; }
  void open() { flag_ = 1; }

 private:
  volatile uint32_t flag_ = 0;
  bool ok_ = false;
};

struct DeviceMemory {
  void* data = nullptr;
  explicit DeviceMemory(size_t bytes) { cudaMalloc(&data, bytes); }
  ~DeviceMemory() { cudaFree(data); }
};

class BackendOrdering : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    auto compute = std::make_unique<EmulatedCompute>();
    compute_ = compute.get();
    ASSERT_EQ(CudaBackend::create(stream_, std::move(compute), &backend_), ncclSuccess);
    codec_ = make_codec("int8");
    input_ = test::make_rank_input(0, kCount, 11);
    args_.count = kCount;
    args_.dtype = DType::kFloat32;
    args_.codec = codec_.get();
    args_.encode.seed = 5;
    context_.scratch = &scratch_;
    context_.counters = &counters_;
    context_.backend = backend_.get();
  }
  void TearDown() override {
    if (backend_ != nullptr) {
      EXPECT_EQ(backend_->finish(), ncclSuccess);
    }
    EXPECT_EQ(compute_ != nullptr ? compute_->failures() : "", "");
    backend_.reset();
    cudaStreamDestroy(stream_);
  }

  // The CPU codec's message for the whole input (the range's seed is the call's at offset 0).
  std::vector<uint8_t> host_message() {
    std::vector<uint8_t> message(message_capacity(args_, kCount));
    EncodeContext encode = args_.encode;
    size_t bytes = 0;
    EXPECT_EQ(codec_->encode(input_.data(), kCount, DType::kFloat32, encode, message.data(),
                             message.size(), &bytes),
              ncclSuccess);
    message.resize(bytes);
    return message;
  }

  static constexpr size_t kCount = 1000;
  cudaStream_t stream_ = nullptr;
  EmulatedCompute* compute_ = nullptr;
  std::unique_ptr<CudaBackend> backend_;
  std::unique_ptr<Codec> codec_;
  std::vector<float> input_;
  CompressedArgs args_;
  CompressedContext context_;
  CompressionScratch scratch_;
  CompressionCounters counters_;
};

TEST_F(BackendOrdering, MessageReachesTheHostOnlyAfterItsCopyAndTheCallerNeverWaits) {
  StreamGate gate(stream_);
  ASSERT_TRUE(gate.ok());
  DeviceMemory send(kCount * sizeof(float));
  // The caller's earlier work: the input arrives behind the gate.
  ASSERT_EQ(cudaMemcpyAsync(send.data, input_.data(), kCount * sizeof(float),
                            cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  args_.send = send.data;
  float* values = backend_->floats(context_, ScratchSlot::kValues, kCount);
  const size_t capacity = message_capacity(args_, kCount);
  uint8_t* message = backend_->message_buffer(context_, ScratchSlot::kOutgoing, capacity);
  std::memset(message, 0, capacity);
  size_t bytes = 0;
  // Returns with the stream still held: enqueueing waited for nothing.
  ASSERT_EQ(backend_->encode_contribution(args_, context_, values, ElementRange{0, kCount}, message,
                                          capacity, &bytes),
            ncclSuccess)
      << last_error();
  EXPECT_FALSE(backend_->messages_ready());
  gate.open();
  ASSERT_EQ(backend_->wait_messages(), ncclSuccess);
  const std::vector<uint8_t> expected = host_message();
  ASSERT_EQ(bytes, expected.size());
  EXPECT_EQ(std::memcmp(message, expected.data(), bytes), 0)
      << "the message in host memory is not the encode of the input the stream wrote first";
  EXPECT_EQ(counters_.pcie_bytes_to_host, bytes);
  EXPECT_EQ(counters_.pcie_bytes_to_device, 0u);
}

TEST_F(BackendOrdering, DecodeFollowsEarlierStreamWorkAndPrecedesLaterWork) {
  StreamGate gate(stream_);
  ASSERT_TRUE(gate.ok());
  DeviceMemory recv(kCount * sizeof(float));
  ASSERT_EQ(cudaMemsetAsync(recv.data, 0x7f, kCount * sizeof(float), stream_), cudaSuccess);
  const std::vector<uint8_t> expected_message = host_message();
  uint8_t* message =
      backend_->message_buffer(context_, ScratchSlot::kIncoming, expected_message.size());
  std::memcpy(message, expected_message.data(), expected_message.size());
  ASSERT_EQ(backend_->decode(args_, context_, message, expected_message.size(),
                             static_cast<float*>(recv.data), kCount, false),
            ncclSuccess)
      << last_error();
  // Pinned: a copy into pageable memory would return only once the held stream ran it.
  float* result = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&result), kCount * sizeof(float)), cudaSuccess);
  std::fill(result, result + kCount, -1.0f);
  ASSERT_EQ(
      cudaMemcpyAsync(result, recv.data, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream_),
      cudaSuccess);
  gate.open();
  ASSERT_EQ(backend_->finish(), ncclSuccess);
  std::vector<float> expected(kCount);
  ASSERT_EQ(codec_->decode(expected_message.data(), expected_message.size(), expected.data(),
                           kCount, DType::kFloat32, false, DecodeContext{}),
            ncclSuccess);
  EXPECT_EQ(std::memcmp(result, expected.data(), kCount * sizeof(float)), 0);
  cudaFreeHost(result);
  EXPECT_EQ(counters_.pcie_bytes_to_device, expected_message.size());
}

TEST_F(BackendOrdering, BadMessageIsRefusedOnTheHostAndTheOutputIsUntouched) {
  DeviceMemory recv(kCount * sizeof(float));
  ASSERT_EQ(cudaMemsetAsync(recv.data, 0x7f, kCount * sizeof(float), stream_), cudaSuccess);
  std::vector<uint8_t> bad = host_message();
  bad[0] ^= 0xff;  // the magic
  uint8_t* message = backend_->message_buffer(context_, ScratchSlot::kIncoming, bad.size());
  std::memcpy(message, bad.data(), bad.size());
  EXPECT_EQ(backend_->decode(args_, context_, message, bad.size(), static_cast<float*>(recv.data),
                             kCount, true),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("magic"), std::string::npos) << last_error();
  ASSERT_EQ(backend_->finish(), ncclSuccess);
  const std::vector<uint8_t> after = test::read_device(recv.data, kCount * sizeof(float), stream_);
  EXPECT_EQ(after, std::vector<uint8_t>(kCount * sizeof(float), 0x7f));
}

// Scatter-reduce-allgather on device buffers, three steps with residuals carried, against the
// model: results, residuals and owner residuals bit for bit (the emulated kernels are the CPU
// codecs, so the device path's order of operations is all that can differ from the host path).
TEST(DeviceSra, MatchesTheModelBitForBit) {
  struct Case {
    const char* codec;
    MemoryKind memory;
  };
  for (const Case& c : {Case{"int8", MemoryKind::kResidual}, Case{"fp16", MemoryKind::kNone},
                        Case{"int4:rounding=stochastic", MemoryKind::kResidual},
                        Case{"qsgd", MemoryKind::kResidual}, Case{"sign", MemoryKind::kResidual},
                        Case{"terngrad", MemoryKind::kNone}}) {
    // Residuals are carried within one dtype (one tensor); bf16 on two ranks only.
    for (auto [n, dtype] : {std::pair{2, DType::kFloat32}, std::pair{3, DType::kFloat32},
                            std::pair{2, DType::kBFloat16}}) {
      std::vector<EmulatedCompute*> computes;
      DeviceRanks ranks(n, c.codec, c.memory, [&] {
        auto compute = std::make_unique<EmulatedCompute>();
        computes.push_back(compute.get());
        return compute;
      });
      ASSERT_TRUE(ranks.ok()) << ranks.error();
      ranks.set_piece_bytes(1024);  // several pieces per chunk
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
        const std::string label = std::string(c.codec) + " n=" + std::to_string(n) + " " +
                                  dtype_name(dtype) + " step=" + std::to_string(step);
        for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
        const model::Comparison results = model::compare_all(ranks.expected(), dtype, outputs);
        EXPECT_EQ(results.mismatches, 0u) << label << ": " << results.first;
        for (int r = 0; r < n; ++r) {
          const model::Comparison residual =
              model::compare_residual(ranks.reference().residual(r), ranks.residual(r), 0);
          EXPECT_EQ(residual.mismatches, 0u) << label << " rank " << r << ": " << residual.first;
          const model::Comparison owner = model::compare_residual(
              ranks.reference().owner_residual(r), ranks.owner_residual(r), 0);
          EXPECT_EQ(owner.mismatches, 0u) << label << " rank " << r << ": " << owner.first;
        }
      }
      for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "") << c.codec;
    }
  }
}

// Only encoded messages cross between device and host: per rank, exactly the messages the
// layout says (model::device_pcie_bytes), far below the tensor's bytes.
TEST(DeviceSra, OnlyEncodedMessagesCrossPcie) {
  const int n = 3;
  const size_t count = 30000;
  DeviceRanks ranks(n, "int8", MemoryKind::kResidual,
                    [] { return std::make_unique<EmulatedCompute>(); });
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(size_t{1} << 20);  // one piece per chunk
  std::vector<std::vector<uint8_t>> inputs, outputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 9), DType::kFloat32));
  }
  std::vector<std::string> errors;
  ranks.allreduce(DType::kFloat32, count, inputs, 1.0, 0, &outputs, &errors);
  std::unique_ptr<Codec> codec = make_codec("int8");
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "");
    const model::PcieBytes expected = model::device_pcie_bytes("sra", *codec, count, n, r);
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_host, expected.to_host) << "rank " << r;
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_device, expected.to_device) << "rank " << r;
    EXPECT_LT(expected.to_host + expected.to_device, count * sizeof(float));
  }
}

}  // namespace
}  // namespace terse
