// PowerSGD's steps (powersgd.h): OpenBLAS GEMMs over blocks of rows on the host, cuBLAS on the
// device, and the shared fixed-order math for orthogonalisation and reconstruction.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codecs/device_support.h"
#include "codecs/matrix_view.h"
#include "codecs/orthogonalize.h"
#include "codecs/powersgd.h"
#include "codecs/powersgd_math.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/cuda/powersgd_kernels.h"
#endif

namespace terse {
namespace {

// Rows of M per host GEMM call: a block of ~256 KiB stays in L2 between being read (and, for
// 16-bit inputs, converted) and being multiplied; OpenBLAS is also faster on such blocks than
// on one tall call (measured 7.4 ms against 11.5 ms for P of a 4096 x 4096 fp32 M, 1 thread).
constexpr size_t kHostBlockFloats = size_t(1) << 16;
// On the device, blocks only exist for 16-bit inputs (cuBLAS reads fp32 M directly).
[[maybe_unused]] constexpr size_t kDeviceBlockFloats = size_t(1) << 22;
// Columns of the reconstruction tile: its sums stay in L1 while the rank terms are added.
constexpr size_t kReconstructTile = 512;
// Inside a tile, blocks of kBlockLanes vectors of kLaneFloats (GCC vector extensions).
typedef float FloatLanes __attribute__((vector_size(32)));
constexpr size_t kLaneFloats = sizeof(FloatLanes) / sizeof(float);
constexpr size_t kBlockLanes = 4;
constexpr size_t kBlockFloats = kBlockLanes * kLaneFloats;

size_t block_rows_for(size_t cols, size_t block_floats) {
  return std::max<size_t>(1, block_floats / cols);
}

template <typename In>
TERSE_CPU_DISPATCH void to_float_cpu(const typename In::Storage* input, size_t count,
                                     float* block) {
  for (size_t i = 0; i < count; ++i) block[i] = In::load(input[i]);
}

// Rows [first, first + count) of M as fp32: M itself for fp32, else converted into `scratch`.
const float* float_rows(const void* m, DType dtype, size_t cols, size_t first, size_t count,
                        float* scratch) {
  if (dtype == DType::kFloat32) return static_cast<const float*>(m) + first * cols;
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    to_float_cpu<In>(static_cast<const typename In::Storage*>(m) + first * cols, count * cols,
                     scratch);
  });
  return scratch;
}

// The rank factors of row i, gathered from P's columns.
void row_factors(const float* p, size_t rows, int rank, size_t i, float* factors) {
  for (int c = 0; c < rank; ++c) factors[c] = p[c * rows + i];
}

// sums[jj] = sum_c factors[c] * q[c * cols + j0 + jj], in the order of powersgd_math.h.
TERSE_CPU_DISPATCH void reconstruct_tile(const float* factors, const float* q, size_t cols,
                                         int rank, size_t j0, size_t width, float* sums) {
  // Blocks of kBlockFloats columns whose sums stay in registers across the rank terms (a pass
  // over an L1 array per term was 2-3x slower); the same operations per element, in c order.
  size_t jj = 0;
  for (; jj + kBlockFloats <= width; jj += kBlockFloats) {
    FloatLanes sum[kBlockLanes];
    FloatLanes first;
    for (size_t k = 0; k < kLaneFloats; ++k) first[k] = factors[0];
    for (size_t v = 0; v < kBlockLanes; ++v) {
      FloatLanes qv;
      memcpy(&qv, q + j0 + jj + v * kLaneFloats, sizeof(qv));
      sum[v] = first * qv;
    }
    for (int c = 1; c < rank; ++c) {
      const float* qc = q + c * cols + j0 + jj;
      FloatLanes factor;
      for (size_t k = 0; k < kLaneFloats; ++k) factor[k] = factors[c];
      for (size_t v = 0; v < kBlockLanes; ++v) {
        FloatLanes qv;
        memcpy(&qv, qc + v * kLaneFloats, sizeof(qv));
        sum[v] = sum[v] + factor * qv;
      }
    }
    // Lane by lane: one copy of the whole array went through the stack, and reading it back as
    // wider vectors than were stored stalled on store forwarding.
    for (size_t v = 0; v < kBlockLanes; ++v) {
      memcpy(sums + jj + v * kLaneFloats, &sum[v], sizeof(sum[v]));
    }
  }
  const float* q0 = q + j0;
  for (size_t k = jj; k < width; ++k) sums[k] = powersgd_first_term(factors[0], q0[k]);
  for (int c = 1; c < rank; ++c) {
    const float* qc = q + c * cols + j0;
    float factor = factors[c];
    for (size_t k = jj; k < width; ++k) sums[k] = powersgd_add_term(sums[k], factor, qc[k]);
  }
}

// Writes `width` floats with streaming stores when `output` is fp32 and aligned for them, and
// says whether it did: the tensor is far larger than the caches and nothing reads it back here,
// so writing it without first reading each line saves a third of the traffic. SSE's streaming
// store is part of x86-64 itself; elsewhere the plain loop stays.
template <typename Storage>
bool stream_floats(const float* sums, size_t width, Storage* output) {
#if defined(__x86_64__)
  if (std::is_same<Storage, float>::value && reinterpret_cast<uintptr_t>(output) % 16 == 0) {
    float* out = reinterpret_cast<float*>(output);
    size_t jj = 0;
    for (; jj + 4 <= width; jj += 4) _mm_stream_ps(out + jj, _mm_loadu_ps(sums + jj));
    for (; jj < width; ++jj) out[jj] = sums[jj];
    return true;
  }
#endif
  (void)sums;
  (void)width;
  (void)output;
  return false;
}

template <typename Out>
TERSE_CPU_DISPATCH void store_tile(const float* sums, size_t width, bool accumulate,
                                   typename Out::Storage* output) {
  if (accumulate) {
    for (size_t jj = 0; jj < width; ++jj) output[jj] = Out::store(sums[jj] + Out::load(output[jj]));
  } else if (stream_floats(sums, width, output)) {
  } else {
    for (size_t jj = 0; jj < width; ++jj) output[jj] = Out::store(sums[jj]);
  }
}

template <typename In>
TERSE_CPU_DISPATCH void residual_tile(const float* sums, size_t width,
                                      const typename In::Storage* input, float* error) {
  for (size_t jj = 0; jj < width; ++jj) error[jj] = In::load(input[jj]) - sums[jj];
}

// Calls visit(i, j0, width, sums) for every tile of P Q^T.
template <typename Visit>
void for_each_reconstructed_tile(const float* p, const float* q, size_t rows, size_t cols, int rank,
                                 Visit&& visit) {
  float factors[kPowerSgdMaxRank];
  float sums[kReconstructTile];
  for (size_t i = 0; i < rows; ++i) {
    row_factors(p, rows, rank, i, factors);
    for (size_t j0 = 0; j0 < cols; j0 += kReconstructTile) {
      size_t width = std::min(kReconstructTile, cols - j0);
      reconstruct_tile(factors, q, cols, rank, j0, width, sums);
      visit(i, j0, width, sums);
    }
  }
}

ncclResult_t check_blas_dimensions(size_t rows, size_t cols, int rank) {
  if (rows > INT_MAX || cols > INT_MAX || rank < 1 || rank > kPowerSgdMaxRank) {
    return fail(ncclInvalidArgument,
                "powersgd: a %zu x %zu matrix with rank %d is outside the GEMMs' int dimensions "
                "or the rank range [1, %d]",
                rows, cols, rank, kPowerSgdMaxRank);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t plan_powersgd(size_t count, DType dtype, const MatrixShape& shape, int rank,
                           PowerSgdPlan* plan) {
  MatrixShape view;
  TERSE_CHECK(resolve_matrix_shape("powersgd", count, shape, &view));
  PowerSgdPlan result;
  result.rows = view.rows;
  result.cols = view.cols;
  result.rank = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(std::max(rank, 0)), std::min(view.rows, view.cols)));
  size_t factor_bytes = 0;
  bool fits = result.rank > 0 && view.rows <= INT_MAX && view.cols <= INT_MAX &&
              powersgd_factor_bytes(view.rows, view.cols, result.rank, &factor_bytes);
  if (!fits || factor_bytes >= count * dtype_size(dtype)) {
    result.dense = true;
    result.rank = 0;
  }
  *plan = result;
  return ncclSuccess;
}

bool powersgd_factor_bytes(size_t rows, size_t cols, int rank, size_t* bytes) {
  if (rank < 0 || rows > SIZE_MAX - cols) return false;
  size_t per_column = rows + cols;
  size_t floats_per_unit = 4 * static_cast<size_t>(rank);
  if (floats_per_unit != 0 && per_column > SIZE_MAX / floats_per_unit) return false;
  *bytes = per_column * floats_per_unit;
  return true;
}

PowerSgdWorkspace::~PowerSgdWorkspace() {
#if TERSE_HAVE_CUDA
  if (device_block_ != nullptr) release_when_allowed([block = device_block_] { cudaFree(block); });
  if (device_flag_ != nullptr) release_when_allowed([flag = device_flag_] { cudaFree(flag); });
#endif
}

float* PowerSgdWorkspace::host_block(size_t floats) {
  if (host_block_.size() < floats) host_block_.resize(floats);
  return host_block_.data();
}

ncclResult_t PowerSgdWorkspace::device_block(size_t floats, void* stream, float** block) {
#if TERSE_HAVE_CUDA
  (void)stream;
  if (device_block_floats_ < floats) {
    TERSE_CHECK(require_allocation_allowed("powersgd workspace", floats * sizeof(float)));
    if (device_block_ != nullptr)
      release_when_allowed([block = device_block_] { cudaFree(block); });
    device_block_ = nullptr;
    device_block_floats_ = 0;
    if (cudaMalloc(&device_block_, floats * sizeof(float)) != cudaSuccess) {
      device_block_ = nullptr;
      return fail(ncclSystemError, "powersgd: cannot allocate a %zu-byte device block",
                  floats * sizeof(float));
    }
    device_block_floats_ = floats;
  }
  *block = device_block_;
  return ncclSuccess;
#else
  (void)floats;
  (void)stream;
  (void)block;
  return require_cuda("powersgd");
#endif
}

ncclResult_t PowerSgdWorkspace::device_flag(void* stream, int** flag) {
#if TERSE_HAVE_CUDA
  (void)stream;
  if (device_flag_ == nullptr) {
    TERSE_CHECK(require_allocation_allowed("powersgd flag", sizeof(int)));
    if (cudaMalloc(&device_flag_, sizeof(int)) != cudaSuccess) {
      device_flag_ = nullptr;
      return fail(ncclSystemError, "powersgd: cannot allocate a device flag");
    }
  }
  *flag = device_flag_;
  return ncclSuccess;
#else
  (void)stream;
  (void)flag;
  return require_cuda("powersgd");
#endif
}

size_t PowerSgdWorkspace::bytes() const {
  return host_block_.capacity() * sizeof(float) + device_block_floats_ * sizeof(float) +
         (device_flag_ != nullptr ? sizeof(int) : 0);
}

ncclResult_t powersgd_initial_q(float* q, size_t cols, int rank, uint64_t step, Memory memory,
                                void* stream) {
  uint64_t seed = powersgd_initial_q_seed(step);
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    return launch_powersgd_fill_random(q, cols, rank, seed, stream);
#endif
  }
  (void)stream;
  size_t count = cols * static_cast<size_t>(rank);
  for (size_t index = 0; index < count; ++index) q[index] = random_column_entry(seed, index);
  return ncclSuccess;
}

ncclResult_t powersgd_prepare_q(float* q, size_t cols, int rank, uint64_t step, Memory memory,
                                void* stream) {
  // A different stream from the initial Q's, so a replaced column is not a copy of column 0.
  uint64_t seed = mix64(powersgd_initial_q_seed(step) + 1);
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    return launch_powersgd_normalize_columns(q, cols, rank, seed, stream);
#endif
  }
  (void)stream;
  normalize_columns(q, cols, rank, seed);
  return ncclSuccess;
}

ncclResult_t powersgd_compute_p(const void* m, DType dtype, size_t rows, size_t cols,
                                const float* q, int rank, float* p, PowerSgdWorkspace* workspace,
                                Memory memory, void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  TERSE_CHECK(check_blas_dimensions(rows, cols, rank));
  PowerSgdWorkspace local;
  if (workspace == nullptr) workspace = &local;
  (void)stream;
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    if (dtype == DType::kFloat32) {
      return powersgd_gemm_p(static_cast<const float*>(m), rows, cols, q, rank, p, rows, stream);
    }
    size_t block_rows = block_rows_for(cols, kDeviceBlockFloats);
    float* block = nullptr;
    TERSE_CHECK(workspace->device_block(block_rows * cols, stream, &block));
    for (size_t first = 0; first < rows; first += block_rows) {
      size_t count = std::min(block_rows, rows - first);
      TERSE_CHECK(launch_powersgd_to_float(m, dtype, first * cols, count * cols, block, stream));
      TERSE_CHECK(powersgd_gemm_p(block, count, cols, q, rank, p + first, rows, stream));
    }
    return ncclSuccess;
#endif
  }
  return powersgd_compute_p_rows(m, dtype, rows, cols, 0, rows, q, rank, p, workspace);
}

size_t powersgd_host_block_rows(size_t cols) {
  return block_rows_for(cols, kHostBlockFloats);
}

ncclResult_t powersgd_compute_p_rows(const void* m, DType dtype, size_t rows, size_t cols,
                                     size_t first_row, size_t row_count, const float* q, int rank,
                                     float* p, PowerSgdWorkspace* workspace) {
  if (rows == 0 || cols == 0 || row_count == 0) return ncclSuccess;
  TERSE_CHECK(check_blas_dimensions(rows, cols, rank));
  if (first_row > rows || row_count > rows - first_row) {
    return fail(ncclInvalidArgument, "powersgd: rows [%zu, %zu) of a %zu-row matrix", first_row,
                first_row + row_count, rows);
  }
  PowerSgdWorkspace local;
  if (workspace == nullptr) workspace = &local;
  size_t block_rows = block_rows_for(cols, kHostBlockFloats);
  float* scratch = dtype == DType::kFloat32 ? nullptr : workspace->host_block(block_rows * cols);
  const size_t end = first_row + row_count;
  for (size_t first = first_row; first < end; first += block_rows) {
    size_t count = std::min(block_rows, end - first);
    const float* block = float_rows(m, dtype, cols, first, count, scratch);
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<int>(count), rank,
                static_cast<int>(cols), 1.0f, block, static_cast<int>(cols), q,
                static_cast<int>(cols), 0.0f, p + first, static_cast<int>(rows));
  }
  return ncclSuccess;
}

ncclResult_t powersgd_orthogonalize(float* p, size_t rows, int rank, Memory memory, void* stream) {
  if (rank > static_cast<int>(std::min<size_t>(rows, kPowerSgdMaxRank)) || rank < 0) {
    return fail(ncclInvalidArgument, "powersgd: cannot orthogonalise %d columns of length %zu",
                rank, rows);
  }
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    return launch_powersgd_orthogonalize(p, rows, rank, stream);
#endif
  }
  (void)stream;
  orthogonalize_columns(p, rows, rank);
  return ncclSuccess;
}

ncclResult_t powersgd_compute_q(const void* m, DType dtype, size_t rows, size_t cols,
                                const float* p, int rank, float* q, PowerSgdWorkspace* workspace,
                                Memory memory, void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  TERSE_CHECK(check_blas_dimensions(rows, cols, rank));
  PowerSgdWorkspace local;
  if (workspace == nullptr) workspace = &local;
  (void)stream;
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    if (dtype == DType::kFloat32) {
      return powersgd_gemm_q(static_cast<const float*>(m), rows, cols, p, rows, rank, q, false,
                             stream);
    }
    size_t block_rows = block_rows_for(cols, kDeviceBlockFloats);
    float* block = nullptr;
    TERSE_CHECK(workspace->device_block(block_rows * cols, stream, &block));
    for (size_t first = 0; first < rows; first += block_rows) {
      size_t count = std::min(block_rows, rows - first);
      TERSE_CHECK(launch_powersgd_to_float(m, dtype, first * cols, count * cols, block, stream));
      TERSE_CHECK(powersgd_gemm_q(block, count, cols, p + first, rows, rank, q, first > 0, stream));
    }
    return ncclSuccess;
#endif
  }
  size_t block_rows = block_rows_for(cols, kHostBlockFloats);
  float* scratch = dtype == DType::kFloat32 ? nullptr : workspace->host_block(block_rows * cols);
  for (size_t first = 0; first < rows; first += block_rows) {
    size_t count = std::min(block_rows, rows - first);
    const float* block = float_rows(m, dtype, cols, first, count, scratch);
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(cols), rank,
                static_cast<int>(count), 1.0f, block, static_cast<int>(cols), p + first,
                static_cast<int>(rows), first == 0 ? 0.0f : 1.0f, q, static_cast<int>(cols));
  }
  return ncclSuccess;
}

ncclResult_t powersgd_reconstruct(const float* p, const float* q, size_t rows, size_t cols,
                                  int rank, void* output, DType dtype, bool accumulate,
                                  Memory memory, void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  TERSE_CHECK(check_blas_dimensions(rows, cols, rank));
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    return launch_powersgd_reconstruct(p, q, rows, cols, rank, output, dtype, accumulate, stream);
#endif
  }
  (void)stream;
  dispatch_dtype(dtype, [&](auto out) {
    using Out = decltype(out);
    auto* typed = static_cast<typename Out::Storage*>(output);
    for_each_reconstructed_tile(p, q, rows, cols, rank,
                                [&](size_t i, size_t j0, size_t width, const float* sums) {
                                  store_tile<Out>(sums, width, accumulate, typed + i * cols + j0);
                                });
  });
#if defined(__x86_64__)
  _mm_sfence();  // the streaming stores (stream_floats) ordered before whatever follows
#endif
  return ncclSuccess;
}

ncclResult_t powersgd_residual(const void* m, DType dtype, const float* p, const float* q,
                               size_t rows, size_t cols, int rank, float* error, Memory memory,
                               void* stream) {
  if (rows == 0 || cols == 0) return ncclSuccess;
  TERSE_CHECK(check_blas_dimensions(rows, cols, rank));
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    return launch_powersgd_residual(m, dtype, p, q, rows, cols, rank, error, stream);
#endif
  }
  (void)stream;
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    const auto* typed = static_cast<const typename In::Storage*>(m);
    for_each_reconstructed_tile(
        p, q, rows, cols, rank, [&](size_t i, size_t j0, size_t width, const float* sums) {
          residual_tile<In>(sums, width, typed + i * cols + j0, error + i * cols + j0);
        });
  });
  return ncclSuccess;
}

ncclResult_t powersgd_all_finite(const float* values, size_t count, PowerSgdWorkspace* workspace,
                                 Memory memory, void* stream, bool* finite) {
  if (memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda("powersgd"));
#if TERSE_HAVE_CUDA
    cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
    int* flag = nullptr;
    bool own_flag = workspace == nullptr;
    if (own_flag) {
      if (cudaMallocAsync(reinterpret_cast<void**>(&flag), sizeof(int), cuda_stream) !=
          cudaSuccess) {
        return fail(ncclSystemError, "powersgd: cannot allocate a device flag");
      }
    } else {
      TERSE_CHECK(workspace->device_flag(stream, &flag));
    }
    int host_flag = 0;
    cudaError_t error = cudaMemsetAsync(flag, 0, sizeof(int), cuda_stream);
    ncclResult_t launched = error == cudaSuccess
                                ? launch_powersgd_find_nonfinite(values, count, flag, stream)
                                : ncclUnhandledCudaError;
    if (error == cudaSuccess && launched == ncclSuccess) {
      error = cudaMemcpyAsync(&host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost, cuda_stream);
    }
    if (own_flag) {
      const cudaError_t freed = cudaFreeAsync(flag, cuda_stream);
      if (error == cudaSuccess) error = freed;
    }
    if (error == cudaSuccess) error = cudaStreamSynchronize(cuda_stream);
    TERSE_CHECK(launched);
    if (error != cudaSuccess) {
      return cuda_call_failed(error, "powersgd: checking factors for NaN/Inf");
    }
    *finite = host_flag == 0;
    return ncclSuccess;
#endif
  }
  (void)workspace;
  (void)stream;
  *finite = count == 0 || abs_bits_finite(column_max_abs_bits(values, count));
  return ncclSuccess;
}

}  // namespace terse
