// The types through which a codec states what it can do (codec.h, docs/design.md section 4): its
// error bound and, for a low-rank codec, its parameters and per-tensor factors. Collectives and the
// planner ask Codec and CodecState for these; they never parse a spec string or cast a state.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace terse {

enum class Memory : uint8_t;  // codec.h
class PowerSgdWorkspace;      // powersgd.h

// The norm S in an error bound (below).
enum class BoundNorm : uint8_t {
  kMaxAbs,  // max_i |x_i| over the whole tensor
  kL2,      // sqrt(sum_i x_i^2) over the whole tensor
};

// A codec's stated bound for one encode-decode of a finite tensor x of `count` elements:
//   |D(E(x))_i - x_i| <= factor * S(x) + a      for every element i,
// with S the norm `norm` of the whole tensor and a a tiny absolute term (fp32 rounding, at most
// about 2^-120 per block), which callers fold into their own rounding allowance. It holds for
// every seed and, for codecs with state, for the first encode of a fresh state (DGC: top-k of
// the gradient itself). Through a collective of k lossy encodes of partial sums it gives
// S_sum ((1 + factor)^k - 1) (collectives/compressed/compressed_error_bound.h). `stated` false:
// the codec gives no bound, and `factor` means nothing.
struct ErrorBound {
  bool stated = false;
  double factor = 0;  // c
  BoundNorm norm = BoundNorm::kMaxAbs;

  // A stated bound of `factor` in `norm`.
  static ErrorBound stated_as(double factor, BoundNorm norm = BoundNorm::kMaxAbs) {
    return ErrorBound{true, factor, norm};
  }
};

// A low-rank codec's parameters (PowerSGD, Vogels et al. 2019): M (rows x cols) travels as
// P (rows x rank) and Q (cols x rank) with M^ = P Q^T. Each of its steps is linear in M for a
// factor every rank shares (P = M Q for a shared Q, then Q = M^T P for a shared, orthonormalised
// P), so an algorithm may sum the ranks' P, then their Q, exactly (powersgd_allreduce.cpp): that
// is this codec's linearity. A whole message (one rank's P and Q) is not linear: M^ is bilinear
// in the factors, so Codec::linear() is false.
struct LowRankParams {
  int rank = 0;             // requested; plan_powersgd clamps it to min(rows, cols) per tensor
  int iterations = 0;       // power iterations per step
  bool warm_start = false;  // each step starts from the previous step's Q (kept in the state)
};

// The per-tensor state of a low-rank codec: the warm-start Q (cols x rank, column-major fp32) of
// a rows x cols view at an effective rank, and the scratch its steps use. CodecState gives it
// through low_rank_factors() (null for other states).
class LowRankFactors {
 public:
  virtual size_t rows() const = 0;
  virtual size_t cols() const = 0;
  virtual int rank() const = 0;
  // Q in `memory`, current (copied from the other side first when the last step ran there), for
  // the caller to read and update in place; device copies are ordered on `stream`.
  virtual ncclResult_t q(Memory memory, void* stream, float** q) = 0;
  // Scratch of the steps (powersgd.h), kept with the state so steady-state calls allocate nothing.
  virtual PowerSgdWorkspace& workspace() = 0;

 protected:
  ~LowRankFactors() = default;
};

}  // namespace terse
