// Launchers of PowerSGD's kernels and cuBLAS calls (powersgd_kernels.cu). Plain C++ so host
// code can call them; only CUDA builds define them. Layouts as in codecs/powersgd.h.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// columns[index] = random_column_entry(seed, index) for index < length * count.
ncclResult_t launch_powersgd_fill_random(float* columns, size_t length, int count, uint64_t seed,
                                         void* stream);

// normalize_columns (orthogonalize.h) on the device, bit-identical to the host version.
ncclResult_t launch_powersgd_normalize_columns(float* columns, size_t length, int count,
                                               uint64_t seed, void* stream);

// orthogonalize_columns (orthogonalize.h) on the device, bit-identical to the host version:
// one block, a warp per column task, right-looking.
ncclResult_t launch_powersgd_orthogonalize(float* columns, size_t length, int count, void* stream);

// block[k] = load_element(input, dtype, offset + k) for k < count.
ncclResult_t launch_powersgd_to_float(const void* input, DType dtype, size_t offset, size_t count,
                                      float* block, void* stream);

// P[0:block_rows, :] = M_block Q with M_block row-major block_rows x cols and P's columns
// `ldp` floats apart (cuBLAS).
ncclResult_t powersgd_gemm_p(const float* m_block, size_t block_rows, size_t cols, const float* q,
                             int rank, float* p, size_t ldp, void* stream);

// Q (+)= M_block^T P[0:block_rows, :]; overwrites Q unless `accumulate` (cuBLAS).
ncclResult_t powersgd_gemm_q(const float* m_block, size_t block_rows, size_t cols, const float* p,
                             size_t ldp, int rank, float* q, bool accumulate, void* stream);

// *flag = 1 when any of `count` values is NaN or Inf (the caller zeroes *flag first).
ncclResult_t launch_powersgd_find_nonfinite(const float* values, size_t count, int* flag,
                                            void* stream);

// output (+)= P Q^T in `dtype`.
ncclResult_t launch_powersgd_reconstruct(const float* p, const float* q, size_t rows, size_t cols,
                                         int rank, void* output, DType dtype, bool accumulate,
                                         void* stream);

// error = M - P Q^T.
ncclResult_t launch_powersgd_residual(const void* m, DType dtype, const float* p, const float* q,
                                      size_t rows, size_t cols, int rank, float* error,
                                      void* stream);

}  // namespace terse
