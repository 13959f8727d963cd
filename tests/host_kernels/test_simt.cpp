// The execution layer of the host-built kernels (simt.h, simt_executor.cpp) and the CUDA
// runtime model's side of it (tests/plugin/fake_cudart): barriers and shuffles give CUDA's
// results, a barrier or shuffle that CUDA leaves undefined is a kernel fault naming the kernel,
// a fault is sticky, a bad configuration is the thread's last error until read, and a kernel's
// first launch waits for the device as lazy loading does. Runs under the model (CTest puts it
// first on LD_LIBRARY_PATH); the fault cases run in a child process each, since a fault poisons
// the process for good, as on a GPU.
#include "simt.h"  // first: it defines CUDA's keywords before any CUDA header does

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "fake_cudart_extensions.h"

namespace {

constexpr unsigned kThreads = 256;

__global__ void block_sum_kernel(const float* in, float* out) {
  __shared__ float tree[kThreads];
  const unsigned t = threadIdx.x;
  tree[t] = in[blockIdx.x * kThreads + t];
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) tree[t] += tree[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tree[0];
}

__global__ void warp_sum_kernel(const int* in, int* out) {
  int value = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  out[threadIdx.x] = value;
}

__global__ void neighbour_kernel(const int* in, int* out) {
  const int value = in[threadIdx.x];
  out[threadIdx.x] =
      __shfl_down_sync(0xffffffffu, value, 1) + 100 * __shfl_sync(0xffffffffu, value, 0);
}

// Half a warp waits at the block's barrier, the other half in a shuffle that needs the first.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  }
}

__global__ void shuffle_with_exited_lane_kernel(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void elementwise_kernel(const float* in, float* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = 2.0f * in[i];
  }
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(device);
}

template <typename T>
std::vector<T> host_copy(const T* device, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

const char* model_fault() {
  auto fault = fake_cudart::entry<fake_cudart::KernelFault>("fakeCudaKernelFault");
  return fault != nullptr ? fault() : "(the CUDA runtime model is not loaded)";
}

class Simt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (fake_cudart::entry<fake_cudart::LaunchHostKernel>("fakeCudaLaunchHostKernel") == nullptr) {
      FAIL() << "run under the CUDA runtime model: its folder first on LD_LIBRARY_PATH";
    }
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(Simt, BarriersOrderSharedMemoryInATreeReduction) {
  const unsigned blocks = 37;
  std::vector<float> in(blocks * kThreads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 97);  // exact sums in fp32
  float* d_in = device_copy(in);
  float* d_out = device_copy(std::vector<float>(blocks));
  ::terse::simt::launch(block_sum_kernel, "block_sum_kernel", blocks, kThreads, 0, stream_)(d_in,
                                                                                            d_out);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << model_fault();
  const std::vector<float> out = host_copy(d_out, blocks);
  for (unsigned b = 0; b < blocks; ++b) {
    const float want =
        std::accumulate(in.begin() + b * kThreads, in.begin() + (b + 1) * kThreads, 0.0f);
    EXPECT_EQ(out[b], want) << "block " << b;
  }
}

TEST_F(Simt, ShufflesExchangeAsAWarpDoes) {
  std::vector<int> in(64);
  std::iota(in.begin(), in.end(), 1);
  int* d_in = device_copy(in);
  int* d_sum = device_copy(std::vector<int>(64));
  int* d_neighbour = device_copy(std::vector<int>(64));
  ::terse::simt::launch(warp_sum_kernel, "warp_sum_kernel", 1, 64, 0, stream_)(d_in, d_sum);
  ::terse::simt::launch(neighbour_kernel, "neighbour_kernel", 1, 64, 0, stream_)(d_in, d_neighbour);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << model_fault();
  const std::vector<int> sum = host_copy(d_sum, 64), neighbour = host_copy(d_neighbour, 64);
  for (int t = 0; t < 64; ++t) {
    const int warp = t / 32, lane = t % 32;
    EXPECT_EQ(sum[t], 32 * (1 + 32 * warp) + 31 * 32 / 2) << t;  // in[] of the warp summed
    // __shfl_down_sync past the warp's end gives the lane's own value.
    const int below = lane == 31 ? in[t] : in[t + 1];
    EXPECT_EQ(neighbour[t], below + 100 * in[warp * 32]) << t;
  }
}

TEST_F(Simt, AGridStrideLoopCoversEveryElementWithAnyGrid) {
  const size_t count = (1 << 20) + 7;
  std::vector<float> in(count);
  for (size_t i = 0; i < count; ++i) in[i] = float(i);
  float* d_in = device_copy(in);
  float* d_out = device_copy(std::vector<float>(count));
  for (unsigned grid : {1u, 3u, 1056u}) {
    ::terse::simt::launch(elementwise_kernel, "elementwise_kernel", grid, 256, 0, stream_)(
        d_in, d_out, count);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << model_fault();
    const std::vector<float> out = host_copy(d_out, count);
    for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(out[i], 2.0f * in[i]) << i;
    EXPECT_EQ(out[count - 1], 2.0f * in[count - 1]);
  }
}

TEST_F(Simt, ABadConfigurationIsTheLastErrorUntilRead) {
  int* d_out = device_copy(std::vector<int>(32));
  ::terse::simt::launch(divergent_barrier_kernel, "too_many_threads", 1, 2048, 0, stream_)(d_out);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// The calls an ordinary CUDA application makes beyond terse's, as CUDA answers them.
TEST_F(Simt, TheModelAnswersTheRuntimeCallsApplicationsMake) {
  cudaStream_t plain = nullptr, prioritised = nullptr;
  ASSERT_EQ(cudaStreamCreate(&plain), cudaSuccess);
  int least = 0, greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&prioritised, cudaStreamNonBlocking, greatest),
            cudaSuccess);
  cudaEvent_t start = nullptr, end = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 0x5a, 64), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, plain), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device, 0x11, 32, plain), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, plain), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  const std::vector<uint8_t> bytes = host_copy(static_cast<const uint8_t*>(device), 64);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(bytes[i], i < 32 ? 0x11 : 0x5a) << i;
  std::vector<float> registered(1024);
  ASSERT_EQ(cudaHostRegister(registered.data(), 4096, cudaHostRegisterDefault), cudaSuccess);
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, registered.data() + 7), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  EXPECT_EQ(cudaHostRegister(registered.data(), 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(registered.data()), cudaErrorHostMemoryNotRegistered);
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, registered.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeUnregistered);
  cudaGetLastError();
}

// Runs `launch` in this (child) process and exits 0 if the stream then reports a sticky fault
// whose description holds `expected`, which every later call returns too.
void expect_fault(cudaStream_t stream, void (*launch)(cudaStream_t, int*), const char* expected) {
  int* d_out = device_copy(std::vector<int>(64));
  launch(stream, d_out);
  const cudaError_t synchronised = cudaStreamSynchronize(stream);
  void* more = nullptr;
  const bool sticky = cudaMalloc(&more, 16) == cudaErrorLaunchFailure &&
                      cudaGetLastError() == cudaErrorLaunchFailure &&
                      cudaGetLastError() == cudaErrorLaunchFailure;
  const std::string fault = model_fault();
  fprintf(stderr, "sync %d sticky %d fault: %s\n", int(synchronised), int(sticky), fault.c_str());
  exit(synchronised == cudaErrorLaunchFailure && sticky && fault.find(expected) != std::string::npos
           ? 0
           : 1);
}

TEST_F(Simt, ABarrierNotEveryThreadReachesIsAStickyFaultNamingTheKernel) {
  EXPECT_EXIT(expect_fault(
                  stream_,
                  [](cudaStream_t s, int* out) {
                    ::terse::simt::launch(divergent_barrier_kernel, "divergent_barrier_kernel", 2,
                                          64, 0, s)(out);
                  },
                  "kernel divergent_barrier_kernel: a barrier that some of the block's "
                  "threads never reach"),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(Simt, AShuffleNamingAnExitedLaneIsAFault) {
  EXPECT_EXIT(expect_fault(
                  stream_,
                  [](cudaStream_t s, int* out) {
                    ::terse::simt::launch(shuffle_with_exited_lane_kernel,
                                          "shuffle_with_exited_lane_kernel", 1, 32, 0, s)(out);
                  },
                  "which names lanes that have exited (lanes 0x20)"),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(Simt, AMisalignedArgumentIsAFaultAsOnAGpu) {
  EXPECT_EXIT(expect_fault(
                  stream_,
                  [](cudaStream_t s, int* out) {
                    float* misaligned = reinterpret_cast<float*>(reinterpret_cast<char*>(out) + 2);
                    ::terse::simt::launch(elementwise_kernel, "elementwise_kernel", 1, 32, 0, s)(
                        misaligned, misaligned, size_t(8));
                  },
                  "kernel elementwise_kernel: argument 0 is a misaligned address (2 "
                  "bytes past a 4-byte boundary)"),
              ::testing::ExitedWithCode(0), "");
}

// Lazy loading: a kernel's first launch waits for the device to be idle, so while a stream is
// held by a wait on host memory it never returns (the model reports the deadlock and aborts).
void launch_while_held(cudaStream_t stream) {
  using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &entry, 12000, cudaEnableDefault, &found);
  static uint32_t flag = 0;
  cudaStream_t held = nullptr;
  cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking);
  reinterpret_cast<WaitValue>(entry)(reinterpret_cast<CUstream>(held),
                                     reinterpret_cast<CUdeviceptr>(&flag), 1, 0);
  std::vector<float> in(256, 1.0f);
  float* d_in = device_copy(in);
  float* d_out = device_copy(in);
  ::terse::simt::launch(elementwise_kernel, "elementwise_kernel", 1, 256, 0, stream)(d_in, d_out,
                                                                                     size_t(256));
  __atomic_store_n(&flag, 1u, __ATOMIC_SEQ_CST);
  exit(cudaStreamSynchronize(stream) == cudaSuccess ? 0 : 1);
}

TEST_F(Simt, AKernelsFirstLaunchWaitsForAHeldStreamUnlessLoadedEagerly) {
  setenv("FAKE_DEADLOCK_MS", "300", 1);
  unsetenv("CUDA_MODULE_LOADING");
  EXPECT_DEATH(launch_while_held(stream_), "loading kernel elementwise_kernel \\(lazy loading\\)");
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  EXPECT_EXIT(launch_while_held(stream_), ::testing::ExitedWithCode(0), "");
  unsetenv("CUDA_MODULE_LOADING");
  // Loaded before the hold (cudaFuncGetAttributes loads a kernel): the launch does not wait.
  EXPECT_EXIT(
      {
        cudaFuncAttributes attributes;
        cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&elementwise_kernel));
        launch_while_held(stream_);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
