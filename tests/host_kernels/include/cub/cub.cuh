// The CUB primitives terse's kernels use, for the host build of the kernels (simt.h): found
// instead of CUB's own header by the include path. Block primitives with CUB's contracts
// (BlockReduce's result in thread 0 only; the caller's __syncthreads before reusing the temporary
// storage), device primitives as one-thread kernels on the stream, with CUB's two-call protocol
// for the temporary storage.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>

namespace cub {

template <typename T, int kThreads>
class BlockReduce {
 public:
  struct TempStorage {
    T values[kThreads];
  };
  explicit BlockReduce(TempStorage& temp) : temp_(temp) {}

  T Sum(T input) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    temp_.values[t] = input;
    __syncthreads();
    if (t != 0) return input;
    T total = temp_.values[0];
    for (int i = 1; i < kThreads; ++i) total = total + temp_.values[i];
    return total;
  }

 private:
  TempStorage& temp_;
};

template <typename T, int kThreads>
class BlockScan {
 public:
  struct TempStorage {
    T values[kThreads];
    T total;
  };
  explicit BlockScan(TempStorage& temp) : temp_(temp) {}

  void ExclusiveSum(T input, T& output, T& aggregate) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    temp_.values[t] = input;
    __syncthreads();
    if (t == 0) {
      T running = T();
      for (int i = 0; i < kThreads; ++i) {
        const T value = temp_.values[i];
        temp_.values[i] = running;
        running = running + value;
      }
      temp_.total = running;
    }
    __syncthreads();
    output = temp_.values[t];
    aggregate = temp_.total;
  }

 private:
  TempStorage& temp_;
};

namespace host_detail {

template <typename T>
__global__ void exclusive_sum_kernel(const T* in, T* out, size_t count) {
  T running = T();
  for (size_t i = 0; i < count; ++i) {
    const T value = in[i];
    out[i] = running;
    running = running + value;
  }
}

template <typename Key>
__global__ void sort_descending_kernel(const Key* in, Key* out, size_t count) {
  std::copy(in, in + count, out);
  std::sort(out, out + count, std::greater<Key>());
}

}  // namespace host_detail

struct DeviceScan {
  template <typename T>
  static cudaError_t ExclusiveSum(void* temp, size_t& temp_bytes, const T* in, T* out, size_t count,
                                  cudaStream_t stream = 0) {
    if (temp == nullptr) {
      temp_bytes = 1;
      return cudaSuccess;
    }
    if (count == 0) return cudaSuccess;
    ::terse::simt::launch(host_detail::exclusive_sum_kernel<T>, "cub::DeviceScan::ExclusiveSum", 1,
                          1, 0, stream)(in, out, count);
    return cudaPeekAtLastError();
  }
};

struct DeviceRadixSort {
  template <typename Key>
  static cudaError_t SortKeysDescending(void* temp, size_t& temp_bytes, const Key* in, Key* out,
                                        size_t count, int begin_bit = 0,
                                        int end_bit = sizeof(Key) * 8, cudaStream_t stream = 0) {
    if (temp == nullptr) {
      temp_bytes = 1;
      return cudaSuccess;
    }
    if (begin_bit != 0 || end_bit != int(sizeof(Key) * 8)) return cudaErrorInvalidValue;
    if (count == 0) return cudaSuccess;
    ::terse::simt::launch(host_detail::sort_descending_kernel<Key>,
                          "cub::DeviceRadixSort::SortKeysDescending", 1, 1, 0,
                          stream)(in, out, count);
    return cudaPeekAtLastError();
  }
};

}  // namespace cub
