// Every stateless codec's device encode and decode against its host codec, bit for bit, at the
// sizes where kernels go wrong (0, 1, 31, 33, a block +- 1, 2^20 + 7 elements), for every input
// dtype, with every device pointer at an offset from its allocation (an element for tensors, a
// word for messages); and a misaligned device pointer refused, naming it, before any kernel runs
// (on a GPU it would be a sticky fault). Needs a GPU, or the host-built kernels under the CUDA
// runtime model (tests/host_kernels); skips, saying so, without either.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codec_test_support.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

namespace terse::testing {
namespace {

// Device memory freed on scope exit, `offset` bytes into its allocation.
class OffsetBuffer {
 public:
  OffsetBuffer(size_t bytes, size_t offset) : offset_(offset) {
    if (cudaMalloc(&base_, bytes + offset + 1) != cudaSuccess) base_ = nullptr;
  }
  ~OffsetBuffer() { cudaFree(base_); }
  OffsetBuffer(const OffsetBuffer&) = delete;
  OffsetBuffer& operator=(const OffsetBuffer&) = delete;
  void* get() const { return base_ == nullptr ? nullptr : static_cast<char*>(base_) + offset_; }

 private:
  void* base_ = nullptr;
  size_t offset_;
};

void upload(void* device, const void* host, size_t bytes) {
  ASSERT_EQ(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<uint8_t> download(const void* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

struct Spec {
  const char* spec;
  size_t block;  // the codec's block (0: none), for the block +- 1 sizes
};

const Spec kSpecs[] = {{"fp16", 0},
                       {"bf16", 0},
                       {"int8", 256},
                       {"int4:block=64", 64},
                       {"int2", 256},
                       {"qsgd", 256},
                       {"terngrad", 256},
                       {"sign", 256},
                       {"mxfp8", 32},
                       {"mxfp4", 32},
                       {"nvfp4", 16},
                       {"topk:ratio=0.05", 0},
                       {"randomk:ratio=0.05", 0}};

const DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3,
                         DType::kFloat8E5M2};

// One encode and two decodes (overwriting, accumulating) of `count` elements on the device with
// offset pointers, each equal to the host's.
void expect_device_equals_host(Codec& codec, DType dtype, size_t count) {
  const size_t element = dtype_size(dtype);
  const std::vector<uint8_t> input = to_dtype(random_normal(count, 17 + count), dtype);
  EncodeContext context;
  context.seed = 5;
  std::vector<float> host_error(count);
  context.error = host_error.data();
  const std::vector<uint8_t> host_message = encode_host(codec, input, dtype, context);

  const size_t capacity = codec.max_encoded_bytes(count, dtype);
  OffsetBuffer device_input(count * element, element), device_message(capacity, 4),
      device_error(count * sizeof(float), sizeof(float));
  ASSERT_NE(device_input.get(), nullptr);
  upload(device_input.get(), input.data(), input.size());
  context.memory = Memory::kDevice;
  context.error = static_cast<float*>(device_error.get());
  size_t bytes = 0;
  ASSERT_EQ(codec.encode(device_input.get(), count, dtype, context, device_message.get(), capacity,
                         &bytes),
            ncclSuccess)
      << last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(download(device_message.get(), bytes), host_message);
  const std::vector<uint8_t> error_bytes = download(device_error.get(), count * sizeof(float));
  ASSERT_EQ(std::memcmp(error_bytes.data(), host_error.data(), error_bytes.size()), 0);

  const std::vector<uint8_t> initial = to_dtype(random_normal(count, 3), dtype);
  for (bool accumulate : {false, true}) {
    std::vector<uint8_t> host_output = initial;
    ASSERT_EQ(codec.decode(host_message.data(), host_message.size(), host_output.data(), count,
                           dtype, accumulate, DecodeContext{}),
              ncclSuccess)
        << last_error();
    OffsetBuffer device_output(count * element, element), sent(host_message.size(), 4);
    upload(device_output.get(), initial.data(), initial.size());
    upload(sent.get(), host_message.data(), host_message.size());
    DecodeContext on_device;
    on_device.memory = Memory::kDevice;
    ASSERT_EQ(codec.decode(sent.get(), host_message.size(), device_output.get(), count, dtype,
                           accumulate, on_device),
              ncclSuccess)
        << last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(download(device_output.get(), count * element), host_output)
        << (accumulate ? "accumulating" : "overwriting");
  }
}

TEST(DeviceOffsetsGpu, EveryCodecEqualsTheHostAtEdgeSizesAndOffsetPointers) {
  TERSE_REQUIRE_GPU();
  for (const Spec& s : kSpecs) {
    auto codec = make_codec(s.spec);
    ASSERT_NE(codec, nullptr);
    std::vector<size_t> counts = {0, 1, 31, 33};
    if (s.block > 1) {
      counts.push_back(s.block - 1);
      counts.push_back(s.block + 1);
    }
    for (DType dtype : kDtypes) {
      // The largest size once per codec (fp32): the host-built kernels take a while at 2^20.
      std::vector<size_t> sizes = counts;
      if (dtype == DType::kFloat32) sizes.push_back((size_t{1} << 20) + 7);
      for (size_t count : sizes) {
        SCOPED_TRACE(std::string(s.spec) + " " + dtype_name(dtype) + " x " + std::to_string(count));
        expect_device_equals_host(*codec, dtype, count);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(DeviceOffsetsGpu, AMisalignedDevicePointerIsRefusedNamingIt) {
  TERSE_REQUIRE_GPU();
  auto codec = make_codec("int8");
  ASSERT_NE(codec, nullptr);
  const size_t count = 1000, capacity = codec->max_encoded_bytes(count, DType::kFloat32);
  OffsetBuffer input(count * 4, 2), message(capacity, 2), aligned_input(count * 4, 0),
      aligned_message(capacity, 0);
  EncodeContext context;
  context.memory = Memory::kDevice;
  size_t bytes = 0;
  EXPECT_EQ(codec->encode(input.get(), count, DType::kFloat32, context, aligned_message.get(),
                          capacity, &bytes),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("device input"), std::string::npos) << last_error();
  EXPECT_EQ(codec->encode(aligned_input.get(), count, DType::kFloat32, context, message.get(),
                          capacity, &bytes),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("device message"), std::string::npos) << last_error();
  DecodeContext on_device;
  on_device.memory = Memory::kDevice;
  EXPECT_EQ(codec->decode(message.get(), 100, aligned_input.get(), count, DType::kFloat32, false,
                          on_device),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("is not 4-byte aligned"), std::string::npos)
      << last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a refused call left work that faulted";
}

}  // namespace
}  // namespace terse::testing

#endif  // TERSE_HAVE_CUDA
