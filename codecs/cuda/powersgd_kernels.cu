// PowerSGD on the device: thin kernels around the shared math (orthogonalize.h,
// powersgd_math.h) and the cuBLAS GEMMs. The column kernels reproduce the host's fixed-order
// reductions exactly: a warp is the 32 lanes of fixed_order_dot, its shuffle tree is
// combine_dot_lanes, so the bits match the CPU's.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "codecs/cuda/cublas_library.h"
#include "codecs/cuda/powersgd_kernels.h"
#include "codecs/device_support.h"
#include "codecs/orthogonalize.h"
#include "codecs/powersgd_math.h"
#include "common/result.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;
// The column kernels run as one block of 32 warps, one column task per warp at a time.
constexpr unsigned kColumnThreads = 1024;
constexpr int kColumnWarps = kColumnThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

static_assert(kDotLanes == 32, "a warp computes one fixed-order dot product");

// fixed_order_dot by one warp; every lane gets the result.
__device__ float warp_dot(const float* x, const float* y, size_t length, unsigned lane) {
  float sum = 0.0f;
  for (size_t i = lane; i < length; i += kDotLanes) sum = sum + x[i] * y[i];
  for (int stride = kDotLanes / 2; stride > 0; stride /= 2) {
    sum = sum + __shfl_down_sync(kFullMask, sum, stride);
  }
  return __shfl_sync(kFullMask, sum, 0);
}

__device__ uint32_t warp_max_abs_bits(const float* x, size_t length, unsigned lane) {
  uint32_t max_abs = 0;
  for (size_t i = lane; i < length; i += kDotLanes) max_abs = max(max_abs, abs_bits(x[i]));
  for (int stride = kDotLanes / 2; stride > 0; stride /= 2) {
    max_abs = max(max_abs, __shfl_xor_sync(kFullMask, max_abs, stride));
  }
  return max_abs;
}

// Element-wise helpers: each lane touches elements i = lane (mod 32), the same ones it reads in
// warp_dot, so a warp needs no barrier between them beyond __syncwarp.
__device__ void warp_scale(float* x, size_t length, float scale, unsigned lane) {
  for (size_t i = lane; i < length; i += kDotLanes) x[i] = x[i] * scale;
  __syncwarp();
}

__device__ void warp_subtract_scaled(float* v, const float* q, float h, size_t length,
                                     unsigned lane) {
  for (size_t i = lane; i < length; i += kDotLanes) v[i] = v[i] - h * q[i];
  __syncwarp();
}

__device__ void warp_fill_random(float* x, size_t length, uint64_t seed, unsigned lane) {
  for (size_t i = lane; i < length; i += kDotLanes) x[i] = random_column_entry(seed, i);
  __syncwarp();
}

__device__ void warp_fill_zero(float* x, size_t length, unsigned lane) {
  for (size_t i = lane; i < length; i += kDotLanes) x[i] = 0.0f;
  __syncwarp();
}

// Step 0 of orthogonalize.h (prepare_column on the host).
__device__ float warp_prepare_column(float* v, size_t length, uint64_t replacement, unsigned lane) {
  uint32_t max_abs = warp_max_abs_bits(v, length, lane);
  if (max_abs == 0 || !abs_bits_finite(max_abs)) {
    warp_fill_random(v, length, replacement, lane);
  } else {
    warp_scale(v, length, column_scale(max_abs), lane);
  }
  return sqrtf(warp_dot(v, v, length, lane));
}

// Steps 1-2 for column k by one warp (project_out_earlier on the host); `coefficients` is
// shared memory. Only the rare collapsed-column path uses it.
__device__ float warp_project_out_earlier(float* columns, size_t length, int k, float* coefficients,
                                          unsigned lane) {
  float* v = columns + k * length;
  for (int j = 0; j < k; ++j) {
    const float* q = columns + j * length;
    warp_subtract_scaled(v, q, warp_dot(q, v, length, lane), length, lane);
  }
  for (int j = 0; j < k; ++j) {
    float h = warp_dot(columns + j * length, v, length, lane);
    if (lane == 0) coefficients[j] = h;
  }
  __syncwarp();
  for (int j = 0; j < k; ++j)
    warp_subtract_scaled(v, columns + j * length, coefficients[j], length, lane);
  return sqrtf(warp_dot(v, v, length, lane));
}

// orthogonalize_columns, right-looking: after column k is final, every later column gets its
// modified-pass update from q_k at once (a warp each). Column c thus sees the same operations
// in the same order as on the host. One block; `count` <= kPowerSgdMaxRank.
__global__ void __launch_bounds__(kColumnThreads)
    orthogonalize_kernel(float* columns, size_t length, int count) {
  __shared__ float initial_norm[kPowerSgdMaxRank];
  __shared__ float coefficients[kPowerSgdMaxRank];
  __shared__ float final_norm;
  __shared__ int zeroed;
  const int warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  for (int c = warp; c < count; c += kColumnWarps) {
    float norm = warp_prepare_column(columns + c * length, length,
                                     replacement_seed(kDegenerateColumnSeed, c), lane);
    if (lane == 0) initial_norm[c] = norm;
  }
  __syncthreads();
  for (int k = 0; k < count; ++k) {
    float* v = columns + k * length;
    // Classical pass: all coefficients against the same v, then v -= sum in j order.
    for (int j = warp; j < k; j += kColumnWarps) {
      float h = warp_dot(columns + j * length, v, length, lane);
      if (lane == 0) coefficients[j] = h;
    }
    __syncthreads();
    for (size_t i = threadIdx.x; i < length; i += blockDim.x) {
      float value = v[i];
      for (int j = 0; j < k; ++j) value = value - coefficients[j] * columns[j * length + i];
      v[i] = value;
    }
    __syncthreads();
    if (warp == 0) {
      float norm = sqrtf(warp_dot(v, v, length, lane));
      if (lane == 0) {
        final_norm = norm;
        zeroed = 0;
      }
      if (!(norm > kCollapseRatio * initial_norm[k])) {  // rare: replace the column
        warp_fill_random(v, length, replacement_seed(kCollapsedColumnSeed, k), lane);
        float replacement_norm = sqrtf(warp_dot(v, v, length, lane));
        norm = warp_project_out_earlier(columns, length, k, coefficients, lane);
        if (!(norm > kCollapseRatio * replacement_norm)) {
          warp_fill_zero(v, length, lane);
          if (lane == 0) zeroed = 1;
        }
        if (lane == 0) final_norm = norm;
      }
    }
    __syncthreads();
    if (!zeroed) {
      float inverse = 1.0f / final_norm;
      for (size_t i = threadIdx.x; i < length; i += blockDim.x) v[i] = v[i] * inverse;
    }
    __syncthreads();
    for (int c = k + 1 + warp; c < count; c += kColumnWarps) {
      float* w = columns + c * length;
      warp_subtract_scaled(w, v, warp_dot(v, w, length, lane), length, lane);
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kColumnThreads)
    normalize_kernel(float* columns, size_t length, int count, uint64_t seed) {
  const int warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  for (int c = warp; c < count; c += kColumnWarps) {
    float* v = columns + c * length;
    float norm = warp_prepare_column(v, length, replacement_seed(seed, c), lane);
    if (!(norm > 0.0f)) {
      warp_fill_zero(v, length, lane);
      if (lane == 0 && length > 0) v[0] = 1.0f;
      continue;
    }
    warp_scale(v, length, 1.0f / norm, lane);
  }
}

__global__ void fill_random_kernel(float* values, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    values[i] = random_column_entry(seed, i);
  }
}

template <typename In>
__global__ void to_float_kernel(const typename In::Storage* input, size_t count, float* block) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    block[i] = In::load(input[i]);
  }
}

__global__ void find_nonfinite_kernel(const float* values, size_t count, int* flag) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    if (!abs_bits_finite(abs_bits(values[i]))) *flag = 1;  // every writer writes 1
  }
}

// A block row of threads walks the columns of rows blockIdx.y, blockIdx.y + gridDim.y, ...
dim3 matrix_grid(size_t rows, size_t cols) {
  size_t x = std::min<size_t>((cols + kThreads - 1) / kThreads, 1024);
  size_t y = std::min<size_t>(rows, 65535);
  return dim3(static_cast<unsigned>(std::max<size_t>(x, 1)),
              static_cast<unsigned>(std::max<size_t>(y, 1)));
}

template <typename Out>
__global__ void reconstruct_kernel(const float* p, const float* q, size_t rows, size_t cols,
                                   int rank, typename Out::Storage* output, bool accumulate) {
  for (size_t i = blockIdx.y; i < rows; i += gridDim.y) {
    for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < cols;
         j += size_t(gridDim.x) * blockDim.x) {
      float value = powersgd_reconstruct_element(p, q, rows, cols, rank, i, j);
      size_t index = i * cols + j;
      output[index] = Out::store(accumulate ? value + Out::load(output[index]) : value);
    }
  }
}

template <typename In>
__global__ void residual_kernel(const typename In::Storage* input, const float* p, const float* q,
                                size_t rows, size_t cols, int rank, float* error) {
  for (size_t i = blockIdx.y; i < rows; i += gridDim.y) {
    for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < cols;
         j += size_t(gridDim.x) * blockDim.x) {
      size_t index = i * cols + j;
      error[index] =
          In::load(input[index]) - powersgd_reconstruct_element(p, q, rows, cols, rank, i, j);
    }
  }
}

// One cuBLAS handle per device and host thread (a handle must not be used by two threads at
// once), created on first use and kept for the thread's life; cuBLAS itself is loaded then
// (cublas_library.h).
ncclResult_t cublas_handle(void* stream, const CublasLibrary** cublas, cublasHandle_t* handle) {
  thread_local std::vector<cublasHandle_t> handles;
  TERSE_CHECK(load_cublas(cublas));
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "powersgd: no current CUDA device for cuBLAS");
  }
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) {
    // cublasCreate waits for every stream (perf/RESULTS.md, "First GPU runs").
    TERSE_CHECK(require_allocation_allowed("powersgd: a cuBLAS handle", 0));
    cublasHandle_t made = nullptr;
    cublasStatus_t status = (*cublas)->create(&made);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return fail(ncclUnhandledCudaError, "powersgd: cublasCreate failed with status %d",
                  static_cast<int>(status));
    }
    // Full fp32 arithmetic: no TF32 tensor-core shortcuts, which would cost 13 mantissa bits.
    status = (*cublas)->set_math_mode(made, CUBLAS_DEFAULT_MATH);
    if (status != CUBLAS_STATUS_SUCCESS) {
      (*cublas)->destroy(made);
      return fail(ncclUnhandledCudaError, "powersgd: cublasSetMathMode failed with status %d",
                  static_cast<int>(status));
    }
    handles[device] = made;
  }
  cublasStatus_t status = (*cublas)->set_stream(handles[device], static_cast<cudaStream_t>(stream));
  if (status != CUBLAS_STATUS_SUCCESS) {
    return fail(ncclUnhandledCudaError, "powersgd: cublasSetStream failed with status %d",
                static_cast<int>(status));
  }
  *handle = handles[device];
  return ncclSuccess;
}

ncclResult_t check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    return fail(ncclUnhandledCudaError, "powersgd: %s failed with cuBLAS status %d", what,
                static_cast<int>(status));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t launch_powersgd_fill_random(float* columns, size_t length, int count, uint64_t seed,
                                         void* stream) {
  size_t total = length * static_cast<size_t>(count);
  if (total == 0) return ncclSuccess;
  fill_random_kernel<<<grid_for(total, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      columns, total, seed);
  return check_launch("powersgd fill random");
}

ncclResult_t launch_powersgd_normalize_columns(float* columns, size_t length, int count,
                                               uint64_t seed, void* stream) {
  if (count <= 0) return ncclSuccess;
  normalize_kernel<<<1, kColumnThreads, 0, static_cast<cudaStream_t>(stream)>>>(columns, length,
                                                                                count, seed);
  return check_launch("powersgd normalize columns");
}

ncclResult_t launch_powersgd_orthogonalize(float* columns, size_t length, int count, void* stream) {
  if (count <= 0 || length == 0) return ncclSuccess;
  if (count > kPowerSgdMaxRank) {
    return fail(ncclInvalidArgument, "powersgd: cannot orthogonalise %d columns (at most %d)",
                count, kPowerSgdMaxRank);
  }
  orthogonalize_kernel<<<1, kColumnThreads, 0, static_cast<cudaStream_t>(stream)>>>(columns, length,
                                                                                    count);
  return check_launch("powersgd orthogonalize");
}

ncclResult_t launch_powersgd_to_float(const void* input, DType dtype, size_t offset, size_t count,
                                      float* block, void* stream) {
  if (count == 0) return ncclSuccess;
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    to_float_kernel<In>
        <<<grid_for(count, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const typename In::Storage*>(input) + offset, count, block);
  });
  return check_launch("powersgd to float");
}

ncclResult_t powersgd_gemm_p(const float* m_block, size_t block_rows, size_t cols, const float* q,
                             int rank, float* p, size_t ldp, void* stream) {
  const CublasLibrary* cublas = nullptr;
  cublasHandle_t handle;
  TERSE_CHECK(cublas_handle(stream, &cublas, &handle));
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: M_block is cols x block_rows with leading dimension cols.
  return check_cublas(
      cublas->sgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(block_rows), rank,
                    static_cast<int>(cols), &one, m_block, static_cast<int>(cols), q,
                    static_cast<int>(cols), &zero, p, static_cast<int>(ldp)),
      "P = M Q");
}

ncclResult_t powersgd_gemm_q(const float* m_block, size_t block_rows, size_t cols, const float* p,
                             size_t ldp, int rank, float* q, bool accumulate, void* stream) {
  const CublasLibrary* cublas = nullptr;
  cublasHandle_t handle;
  TERSE_CHECK(cublas_handle(stream, &cublas, &handle));
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return check_cublas(
      cublas->sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(cols), rank,
                    static_cast<int>(block_rows), &one, m_block, static_cast<int>(cols), p,
                    static_cast<int>(ldp), &beta, q, static_cast<int>(cols)),
      "Q = M^T P");
}

ncclResult_t launch_powersgd_find_nonfinite(const float* values, size_t count, int* flag,
                                            void* stream) {
  if (count == 0) return ncclSuccess;
  find_nonfinite_kernel<<<grid_for(count, kThreads), kThreads, 0,
                          static_cast<cudaStream_t>(stream)>>>(values, count, flag);
  return check_launch("powersgd find non-finite");
}

ncclResult_t launch_powersgd_reconstruct(const float* p, const float* q, size_t rows, size_t cols,
                                         int rank, void* output, DType dtype, bool accumulate,
                                         void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  dispatch_dtype(dtype, [&](auto out) {
    using Out = decltype(out);
    reconstruct_kernel<Out>
        <<<matrix_grid(rows, cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            p, q, rows, cols, rank, static_cast<typename Out::Storage*>(output), accumulate);
  });
  return check_launch("powersgd reconstruct");
}

ncclResult_t launch_powersgd_residual(const void* m, DType dtype, const float* p, const float* q,
                                      size_t rows, size_t cols, int rank, float* error,
                                      void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    residual_kernel<In>
        <<<matrix_grid(rows, cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const typename In::Storage*>(m), p, q, rows, cols, rank, error);
  });
  return check_launch("powersgd residual");
}

}  // namespace terse
