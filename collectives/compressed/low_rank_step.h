// One of PowerSGD's tensor-sized steps (codecs/powersgd.h) as an execution backend runs it on
// its own memory (powersgd_allreduce.cpp): the two GEMMs, the orthogonalisation, this rank's
// error and the reconstruction. What stays on the host is not a step here: Q's initial value and
// its normalisation (cols x rank floats, prepared where its warm start is kept) and the factors'
// exact allreduces (the factors cross PCIe as messages do).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"
#include "codecs/powersgd.h"

namespace terse {

enum class LowRankOp : uint8_t {
  kComputeP,       // p = m q
  kOrthogonalize,  // p's columns orthonormalised in place
  kComputeQ,       // q = m^T p
  kResidual,       // out = m - p q^T (out may be m itself)
  kReconstruct,    // out = p q^T
};

// The operands of a step, every pointer in the backend's memory. M is rows x cols row-major
// fp32; P (rows x rank) and Q (cols x rank) column-major fp32; out rows * cols fp32.
struct LowRankStep {
  LowRankOp op = LowRankOp::kComputeP;
  const float* m = nullptr;
  float* p = nullptr;
  float* q = nullptr;
  float* out = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  int rank = 0;
};

// The step on `memory` (device work ordered on `stream`), through codecs/powersgd.h. Inline, so
// that the tests' emulated kernels (linked with the codecs alone) run the very same calls.
inline ncclResult_t run_low_rank_step(const LowRankStep& step, Memory memory, void* stream) {
  switch (step.op) {
    case LowRankOp::kComputeP:
      return powersgd_compute_p(step.m, DType::kFloat32, step.rows, step.cols, step.q, step.rank,
                                step.p, nullptr, memory, stream);
    case LowRankOp::kOrthogonalize:
      return powersgd_orthogonalize(step.p, step.rows, step.rank, memory, stream);
    case LowRankOp::kComputeQ:
      return powersgd_compute_q(step.m, DType::kFloat32, step.rows, step.cols, step.p, step.rank,
                                step.q, nullptr, memory, stream);
    case LowRankOp::kResidual:
      return powersgd_residual(step.m, DType::kFloat32, step.p, step.q, step.rows, step.cols,
                               step.rank, step.out, memory, stream);
    case LowRankOp::kReconstruct:
      return powersgd_reconstruct(step.p, step.q, step.rows, step.cols, step.rank, step.out,
                                  DType::kFloat32, false, memory, stream);
  }
  return ncclInternalError;
}

}  // namespace terse
