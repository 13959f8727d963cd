// PowerSGD's steps as separate functions (Vogels et al. 2019), for the codec
// (powersgd_codec.cpp) and for the collective layer, whose distributed version runs
//   P = M Q; allreduce(P); orthogonalise(P); Q = M^T P; allreduce(Q); M^ = P Q^T
// with the allreduces between the steps.
//
// Layouts: M is `rows` x `cols`, row-major, of any DType; P (rows x rank) and Q (cols x rank)
// are column-major fp32 (column c of P at p + c * rows, of Q at q + c * cols). `memory` says
// where every pointer of a call lives; device calls are ordered on `stream` (cudaStream_t).
// The GEMMs are OpenBLAS on the host and cuBLAS on the device, so P and Q differ in the last
// bits between the two; orthogonalisation and reconstruction are shared fixed-order code
// (orthogonalize.h, powersgd_math.h) and give the same bits on either side for the same input.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/codec.h"
#include "codecs/dtype.h"

namespace terse {

// How a tensor travels under PowerSGD.
struct PowerSgdPlan {
  size_t rows = 0;
  size_t cols = 0;
  int rank = 0;        // effective rank: min(requested, rows, cols); 0 when dense
  bool dense = false;  // the tensor goes uncompressed (see plan_powersgd)
};

// Resolves the matrix view (an explicit `shape`, else near-square; a wrong shape is refused),
// clamps `rank` to min(rows, cols), and chooses dense when the factors would take at least as
// many bytes as the tensor itself: 4 * rank * (rows + cols) >= count * dtype_size. That covers
// empty and tiny tensors, prime counts (a 1 x n view) and every rank >= min(rows, cols), where
// a low-rank message could only be larger than the data.
ncclResult_t plan_powersgd(size_t count, DType dtype, const MatrixShape& shape, int rank,
                           PowerSgdPlan* plan);

// 4 * rank * (rows + cols), or false when that overflows size_t.
bool powersgd_factor_bytes(size_t rows, size_t cols, int rank, size_t* bytes);

// Scratch the steps need beyond their inputs and outputs: blocks of M converted to fp32 (fp16
// and bf16 inputs) and, on the device, a flag. Grows on demand, freed on destruction; keep one
// per tensor (PowerSgdState holds one) so steady-state calls allocate nothing.
class PowerSgdWorkspace {
 public:
  PowerSgdWorkspace() = default;
  PowerSgdWorkspace(const PowerSgdWorkspace&) = delete;
  PowerSgdWorkspace& operator=(const PowerSgdWorkspace&) = delete;
  ~PowerSgdWorkspace();

  float* host_block(size_t floats);
  ncclResult_t device_block(size_t floats, void* stream, float** block);
  ncclResult_t device_flag(void* stream, int** flag);
  size_t bytes() const;

 private:
  std::vector<float> host_block_;
  float* device_block_ = nullptr;
  size_t device_block_floats_ = 0;
  int* device_flag_ = nullptr;
};

// Q = the initial Q of `step` (powersgd_math.h), a pseudo-random function of (step, index).
ncclResult_t powersgd_initial_q(float* q, size_t cols, int rank, uint64_t step, Memory memory,
                                void* stream);

// Scales Q's columns to unit norm; all-zero or non-finite columns become pseudo-random
// (seeded by `step`). Run before compute_p on a warm-started Q.
ncclResult_t powersgd_prepare_q(float* q, size_t cols, int rank, uint64_t step, Memory memory,
                                void* stream);

// P = M Q.
ncclResult_t powersgd_compute_p(const void* m, DType dtype, size_t rows, size_t cols,
                                const float* q, int rank, float* p, PowerSgdWorkspace* workspace,
                                Memory memory, void* stream);

// Rows [first, first + count) of P = M Q, host memory only: lets a caller compute P block by
// block right after it wrote each block of M, while the block is still in cache.
ncclResult_t powersgd_compute_p_rows(const void* m, DType dtype, size_t rows, size_t cols,
                                     size_t first, size_t count, const float* q, int rank, float* p,
                                     PowerSgdWorkspace* workspace);

// Rows of M per host GEMM call of powersgd_compute_p (a block of about 256 KiB).
size_t powersgd_host_block_rows(size_t cols);

// Orthonormalises P's columns in place (orthogonalize.h: fixed order, no NaN whatever P holds,
// rank-deficient columns replaced). Requires rank <= rows.
ncclResult_t powersgd_orthogonalize(float* p, size_t rows, int rank, Memory memory, void* stream);

// Q = M^T P.
ncclResult_t powersgd_compute_q(const void* m, DType dtype, size_t rows, size_t cols,
                                const float* p, int rank, float* q, PowerSgdWorkspace* workspace,
                                Memory memory, void* stream);

// output = P Q^T (or output += P Q^T when `accumulate`), in `dtype`.
ncclResult_t powersgd_reconstruct(const float* p, const float* q, size_t rows, size_t cols,
                                  int rank, void* output, DType dtype, bool accumulate,
                                  Memory memory, void* stream);

// error = M - P Q^T in fp32, with P Q^T exactly as powersgd_reconstruct computes it. On the host
// an fp32 M may be `error` itself (M replaced by the error in place).
ncclResult_t powersgd_residual(const void* m, DType dtype, const float* p, const float* q,
                               size_t rows, size_t cols, int rank, float* error, Memory memory,
                               void* stream);

// Whether all `count` floats are finite. The device version waits for the stream.
ncclResult_t powersgd_all_finite(const float* values, size_t count, PowerSgdWorkspace* workspace,
                                 Memory memory, void* stream, bool* finite);

}  // namespace terse
