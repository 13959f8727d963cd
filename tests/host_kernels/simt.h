// The CUDA device vocabulary on the host: force-included before each codecs/cuda/*.cu file when
// the tests compile the kernels' own source with the host compiler (tests/host_kernels), after
// translate_launches.py turned each `kernel<<<...>>>(args)` into simt::launch(...)(args).
//
// A launch runs every thread of the grid as a fiber on one stream thread of the CUDA runtime
// model (tests/plugin/fake_cudart), block after block in a shuffled order; within a block the
// fibers switch only at __syncthreads, __syncwarp and the warp shuffles and votes, which are
// barriers of the block's or the warp's threads. A barrier some thread never reaches, or a
// shuffle whose mask names a lane that exited, is a kernel fault (what compute-sanitizer's
// synccheck reports), never a hang. __shared__ variables are the stream thread's own: the blocks
// it runs one after another each see them, uninitialised as on a GPU.
#pragma once

// Before cuda_runtime.h, whose host_defines.h keeps definitions made first.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __constant__
#define __launch_bounds__(...)

#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace terse {
namespace simt {

struct ThreadPlace {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};

// The running fiber's indices (set by the scheduler as it switches to a fiber).
extern thread_local const ThreadPlace* current_place;
inline const ThreadPlace& place() {
  return *current_place;
}

// Block- and warp-wide barriers of the running fiber (simt_executor.cpp).
void sync_block(const char* what);
// Lanes of `mask` exchange 8 bytes each: returns the bytes lane `source` gave.
uint64_t warp_exchange(unsigned mask, uint64_t mine, unsigned source, const char* what);
void sync_warp(unsigned mask);

inline unsigned lane_id() {
  const ThreadPlace& p = place();
  const unsigned linear = p.thread.x + p.block_dim.x * (p.thread.y + p.block_dim.y * p.thread.z);
  return linear % 32;
}

template <typename T>
T exchange(unsigned mask, T value, unsigned source, const char* what) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_exchange(mask, bits, source, what);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// A grid's work: `thread` runs once per thread of the grid, on a fiber; or, when `fault` is set,
// nothing, and the launch faults with it (a misaligned argument).
struct Grid {
  const char* name;
  dim3 grid, block;
  std::function<void()> thread;
  std::string fault;
};

// "" when `value` is not a pointer or is aligned for what it points to; else what is wrong. A
// GPU faults on a misaligned access (cudaErrorMisalignedAddress, sticky); x86 would not.
template <typename T>
std::string misalignment(T value, int position) {
  if constexpr (std::is_pointer<T>::value) {
    using Pointee = std::remove_cv_t<std::remove_pointer_t<T>>;
    if constexpr (!std::is_void<Pointee>::value) {
      const auto address = reinterpret_cast<uintptr_t>(value);
      if (address % alignof(Pointee) != 0) {
        return "argument " + std::to_string(position) + " is a misaligned address (" +
               std::to_string(address % alignof(Pointee)) + " bytes past a " +
               std::to_string(alignof(Pointee)) + "-byte boundary)";
      }
    }
  }
  return "";
}

// Enqueues `grid` on `stream` through the runtime model; the launch's error as CUDA reports it.
cudaError_t enqueue(const void* kernel, Grid grid, cudaStream_t stream);

// A kernel argument as the kernel sees it: a device pointer becomes the runtime model's view of
// that memory, which host code elsewhere cannot touch.
void* kernel_view(const void* pointer);
template <typename T>
T as_kernel_argument(T value) {
  if constexpr (std::is_pointer<T>::value) {
    return static_cast<T>(kernel_view(static_cast<const void*>(value)));
  } else {
    return value;
  }
}

template <typename... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, cudaStream_t stream)
      : kernel_(kernel), name_(name), grid_(grid), block_(block), stream_(stream) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "a kernel's arguments");
    auto bound = std::make_shared<std::tuple<std::decay_t<Params>...>>(
        as_kernel_argument(static_cast<std::decay_t<Params>>(args))...);
    std::string fault;
    int position = 0;
    ((fault += fault.empty() ? misalignment(static_cast<std::decay_t<Params>>(args), position) : "",
      ++position),
     ...);
    void (*kernel)(Params...) = kernel_;
    enqueue(reinterpret_cast<const void*>(kernel),
            Grid{name_, grid_, block_, [kernel, bound] { std::apply(kernel, *bound); }, fault},
            stream_);
  }

 private:
  void (*kernel_)(Params...);
  const char* name_;
  dim3 grid_, block_;
  cudaStream_t stream_;
};

template <typename... Params>
Launcher<Params...> launch(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block,
                           size_t shared_bytes, cudaStream_t stream) {
  (void)shared_bytes;  // no dynamic shared memory in terse's kernels
  return Launcher<Params...>(kernel, name, grid, block, stream);
}

}  // namespace simt
}  // namespace terse

#define threadIdx (::terse::simt::place().thread)
#define blockIdx (::terse::simt::place().block)
#define blockDim (::terse::simt::place().block_dim)
#define gridDim (::terse::simt::place().grid_dim)

inline void __syncthreads() {
  ::terse::simt::sync_block("__syncthreads");
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::terse::simt::sync_warp(mask);
}
template <typename T>
T __shfl_sync(unsigned mask, T value, int source, int width = 32) {
  const unsigned lane = ::terse::simt::lane_id();
  const unsigned from = (lane & ~unsigned(width - 1)) + unsigned(source) % unsigned(width);
  return ::terse::simt::exchange(mask, value, from, "__shfl_sync");
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  const unsigned lane = ::terse::simt::lane_id();
  unsigned from = lane ^ unsigned(lane_mask);
  // A source outside the caller's segment of `width` lanes gives the caller's own value.
  if ((from & ~unsigned(width - 1)) != (lane & ~unsigned(width - 1))) from = lane;
  return ::terse::simt::exchange(mask, value, from, "__shfl_xor_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::terse::simt::lane_id();
  unsigned from = lane + delta;
  if ((from & ~unsigned(width - 1)) != (lane & ~unsigned(width - 1))) from = lane;
  return ::terse::simt::exchange(mask, value, from, "__shfl_down_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::terse::simt::lane_id();
  unsigned from = lane - delta;
  if (delta > (lane & unsigned(width - 1))) from = lane;
  return ::terse::simt::exchange(mask, value, from, "__shfl_up_sync");
}

inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(unsigned x) {
  return x == 0 ? 32 : __builtin_clz(x);
}
inline int __clzll(unsigned long long x) {
  return x == 0 ? 64 : __builtin_clzll(x);
}
inline int __ffs(unsigned x) {
  return __builtin_ffs(static_cast<int>(x));
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

// Atomics: blocks of one launch run on one thread, but kernels of several streams run at once.
template <typename T>
T atomicAdd(T* address, T value) {
  if constexpr (std::is_floating_point<T>::value) {
    T old = *address, sum;
    do {
      sum = old + value;
    } while (
        !__atomic_compare_exchange(address, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return old;
  } else {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  }
}
template <typename T>
T atomicMax(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (old < value && !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (value < old && !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicOr(T* address, T value) {
  return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}

// Device code's unqualified math (CUDA declares these in the global namespace).
using std::isfinite;
using std::isinf;
using std::isnan;
using std::max;
using std::min;
