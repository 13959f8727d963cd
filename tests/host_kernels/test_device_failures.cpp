// CUDA failures on a codec's device path, asked of the CUDA runtime model (fakeCudaFailCall): a
// failed call is an ncclUnhandledCudaError that names what failed, it is not left behind as the
// thread's last error for an unrelated later call, and the codec's next encode gives the host's
// bytes. Runs on the kernels built for the host (codec_host_kernel_tests).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codecs/codec_test_support.h"
#include "codecs/sparse_test_support.h"
#include "common/result.h"
#include "fake_cudart_extensions.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

namespace terse::testing {
namespace {

// The n-th call of `function` from now fails (1: the next one).
void fail_call(const char* function, long n) {
  auto fail = fake_cudart::entry<fake_cudart::FailCall>("fakeCudaFailCall");
  ASSERT_NE(fail, nullptr) << "run under the CUDA runtime model (tests/plugin/fake_cudart)";
  fail(function, n);
}

TEST(DeviceFailuresGpu, AFailedScratchAllocationNamesItselfAndTheNextEncodeWorks) {
  TERSE_REQUIRE_GPU();
  auto codec = make_sparse("topk:ratio=0.01");
  const size_t count = 100003;
  const auto input = to_dtype(random_normal(count, 5), DType::kFloat32);
  const auto host_message = encode_host(*codec, input, DType::kFloat32, EncodeContext{});
  std::vector<uint8_t> device_message;
  fail_call("cudaMallocAsync", 1);
  EXPECT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &device_message),
            ncclUnhandledCudaError);
  EXPECT_NE(std::string(last_error()).find("topk select: scratch"), std::string::npos)
      << last_error();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "terse left its failure as the last error";
  ASSERT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &device_message),
            ncclSuccess)
      << last_error();
  EXPECT_EQ(device_message, host_message);
}

TEST(DeviceFailuresGpu, AFailedKernelLaunchIsAnErrorNamingTheKernelsWork) {
  TERSE_REQUIRE_GPU();
  auto codec = make_codec("int8");
  const size_t count = 4099;
  const auto input = to_dtype(random_normal(count, 6), DType::kFloat32);
  const auto host_message = encode_host(*codec, input, DType::kFloat32, EncodeContext{});
  std::vector<uint8_t> device_message;
  fail_call("cudaLaunchKernel", 1);
  EXPECT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &device_message),
            ncclUnhandledCudaError);
  EXPECT_NE(std::string(last_error()).find("kernel launch failed"), std::string::npos)
      << last_error();
  ASSERT_EQ(encode_device(*codec, input, DType::kFloat32, EncodeContext{}, &device_message),
            ncclSuccess)
      << last_error();
  EXPECT_EQ(device_message, host_message);
}

}  // namespace
}  // namespace terse::testing

#endif  // TERSE_HAVE_CUDA
