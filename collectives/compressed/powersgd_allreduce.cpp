// Distributed PowerSGD (Vogels et al. 2019): each rank views its contribution M (gradient plus
// residual, fp32) as a rows x cols matrix and the ranks agree on a rank-r approximation of the
// SUM of their matrices with two small exact allreduces per power iteration:
//
//   Q = the warm-started Q of the tensor's state (or the step's initial Q), normalised
//   P = M Q;            P = allreduce_sum(P);   orthonormalise P        (rows x r)
//   Q_local = M^T P;    residual = M - P Q_local^T (this rank's error feedback)
//   Q = allreduce_sum(Q_local)                                         (cols x r)
//   result = P Q^T = P P^T (sum of M)
//
// Every rank holds the same P and Q after the allreduces (group_allreduce_sum gives identical
// bits), so every rank reconstructs the same result, and the summed Q is the next step's warm
// start on every rank. The result is an orthogonal projection of the exact sum, so
// ||result - sum||_F <= ||sum||_F <= sum over ranks of ||M_r||_F: one lossy step in the L2 norm
// (compressed_error_bound.h). Each rank sends 2 (n-1)/n * 4 r (rows + cols) bytes per iteration.
//
// With a residual, M is built over the residual's own buffer (each block of rows just before its
// part of the first P is computed, while it is in cache) and the error M - P Q_local^T of the
// last iteration is written over it in place once the factors are known to be finite: two passes
// over the tensor fewer than a separate M. Until then the entry's residual holds M.
//
// Tensors the plan makes dense (tiny, prime counts, rank >= min(rows, cols)) and factors that
// come out NaN or Inf (the input held them; every rank sees the same summed factors, so every
// rank decides alike) are summed exactly instead, and the residual is cleared: nothing was lost.
//
// Steps: iteration i uses [2 i S, (2 i + 2) S) with S = group_allreduce_steps(n) (P, then Q);
// the dense sum comes after the last iteration.
//
// Memory: M, the GEMMs, the orthogonalisation, the error and the reconstruction are the call's
// execution backend's (execution_backend.h, low_rank_step.h), so device buffers run them on the
// device with a device residual; the factors' allreduces, Q's preparation and the warm start
// stay in host memory, and on a device backend the factors cross PCIe as messages do (P and
// Q_local out, Q and the summed P in, per iteration; the orthogonalised P out and the summed Q
// in at the end); a dense sum moves M out and the sum in, whole. The host backend's copies are
// nothing (one buffer), and it builds M block by block with the first P, as before.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "codecs/powersgd.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/compressed/group_allreduce.h"
#include "common/result.h"

namespace terse {
namespace {

using Clock = std::chrono::steady_clock;

// The codec's own parameters (Codec::low_rank); the algorithm table runs this algorithm only
// for codecs that have them, and a codec without falls back to PowerSGD's defaults.
LowRankParams parameters_of(const Codec& codec) {
  if (codec.low_rank() != nullptr) return *codec.low_rank();
  LowRankParams defaults;
  defaults.rank = 4;
  defaults.iterations = 1;
  defaults.warm_start = true;
  return defaults;
}

class DistributedPowerSgd {
 public:
  DistributedPowerSgd(const CompressedArgs& args, const CompressedContext& context,
                      ExecutionBackend& backend)
      : args_(args),
        context_(context),
        backend_(backend),
        on_host_(backend.memory() == Memory::kHost),
        n_(context.group.size()),
        ring_steps_(group_allreduce_steps(context.group.size())),
        parameters_(parameters_of(*args.codec)) {}

  ncclResult_t run() {
    PowerSgdPlan plan;
    TERSE_CHECK(
        plan_powersgd(args_.count, DType::kFloat32, args_.encode.shape, parameters_.rank, &plan));
    // With a residual, M is built over it and the last iteration turns it into the error in
    // place: two passes over the tensor fewer than a separate M.
    residual_ = call_residual(args_);
    m_ = residual_ != nullptr ? residual_
                              : backend_.floats(context_, ScratchSlot::kValues, args_.count);
    if (m_ == nullptr) return ncclSystemError;
    // The host backend builds M block by block with the first P (iterate) when it can; a device
    // backend builds it whole, one kernel.
    if (plan.dense || residual_ == nullptr || !on_host_) {
      TERSE_CHECK(backend_.make_contribution(args_, context_, m_, ElementRange{0, args_.count}));
      contribution_made_ = true;
    }
    if (plan.dense) return dense_sum();
    rows_ = plan.rows;
    cols_ = plan.cols;
    r_ = plan.rank;

    LowRankFactors* state = args_.entry != nullptr && args_.entry->state() != nullptr
                                ? args_.entry->state()->low_rank_factors()
                                : nullptr;
    if (state != nullptr &&
        (state->rows() != rows_ || state->cols() != cols_ || state->rank() != r_)) {
      state = nullptr;  // made for another view: start from the initial Q, keep nothing
    }
    TERSE_CHECK(lay_out_factors());
    workspace_ = state != nullptr ? &state->workspace() : &own_workspace_;

    // Q is prepared on the host, where its warm start is kept (cols x rank floats).
    const auto start = Clock::now();
    float* warm = nullptr;
    if (state != nullptr) TERSE_CHECK(state->q(Memory::kHost, nullptr, &warm));
    if (warm != nullptr && parameters_.warm_start) {
      std::memcpy(host_q_, warm, q_floats() * sizeof(float));
    } else {
      TERSE_CHECK(
          powersgd_initial_q(host_q_, cols_, r_, args_.encode.step, Memory::kHost, nullptr));
    }
    add_encode_time(start);

    for (int iteration = 0; iteration < parameters_.iterations; ++iteration) {
      if (iteration > 0) std::memcpy(host_q_, host_q_sum_, q_floats() * sizeof(float));
      TERSE_CHECK(iterate(iteration));
    }
    // Every rank holds the same orthogonalised P and summed Q, so every rank decides alike.
    TERSE_CHECK(backend_.copy_to_host(context_, host_p_, p_, p_floats()));
    TERSE_CHECK(backend_.wait_messages());
    bool finite = false;
    TERSE_CHECK(
        powersgd_all_finite(host_p_, p_floats(), workspace_, Memory::kHost, nullptr, &finite));
    bool q_finite = false;
    TERSE_CHECK(powersgd_all_finite(host_q_sum_, q_floats(), workspace_, Memory::kHost, nullptr,
                                    &q_finite));
    if (!finite || !q_finite) return dense_sum();
    if (residual_ != nullptr) {
      // This rank's error, M - P Q_local^T of the last iteration, written over M in place (M is
      // the residual's buffer, run()); only now, so that the dense fallback above still has M.
      const auto start = Clock::now();
      TERSE_CHECK(backend_.low_rank(step(LowRankOp::kResidual, q_local_, residual_)));
      add_encode_time(start);
    }
    if (warm != nullptr && parameters_.warm_start) {
      std::memcpy(warm, host_q_sum_, q_floats() * sizeof(float));
    }

    const auto decode_start = Clock::now();
    float* sum = backend_.result_floats(args_, context_, ScratchSlot::kAccumulator);
    if (sum == nullptr) return ncclSystemError;
    TERSE_CHECK(backend_.copy_from_host(context_, q_sum_, host_q_sum_, q_floats()));
    TERSE_CHECK(backend_.low_rank(step(LowRankOp::kReconstruct, q_sum_, sum)));
    if (context_.counters != nullptr) {
      context_.counters->decode_seconds +=
          std::chrono::duration<double>(Clock::now() - decode_start).count();
    }
    return backend_.write_result(args_, sum, ElementRange{0, args_.count});
  }

 private:
  size_t p_floats() const { return rows_ * static_cast<size_t>(r_); }
  size_t q_floats() const { return cols_ * static_cast<size_t>(r_); }

  uint32_t first_step(int allreduce) const {
    return context_.first_step + static_cast<uint32_t>(allreduce) * ring_steps_;
  }

  void add_encode_time(Clock::time_point start) const {
    if (context_.counters != nullptr) {
      context_.counters->encode_seconds +=
          std::chrono::duration<double>(Clock::now() - start).count();
    }
  }

  // The factors P, Q, Q_local and Q_sum in the backend's memory, and their copies in host memory
  // for the allreduces and Q's preparation: the same buffers on the host backend (every copy
  // between them is then nothing), pinned message memory on a device backend (its copies are
  // asynchronous, and a buffer it replaces is kept until the backend goes).
  ncclResult_t lay_out_factors() {
    const size_t floats = p_floats() + 3 * q_floats();
    float* factors = backend_.floats(context_, ScratchSlot::kSecondary, floats);
    float* host = on_host_ ? factors
                           : reinterpret_cast<float*>(backend_.message_buffer(
                                 context_, ScratchSlot::kOutgoing, floats * sizeof(float)));
    if (factors == nullptr || host == nullptr) return ncclSystemError;
    // The dense sum's host buffer too (dense_sum), made now: the non-finite fallback can come
    // in any call, perhaps while the caller's stream is held, when nothing can be allocated.
    if (!on_host_ && backend_.message_buffer(context_, ScratchSlot::kIncoming,
                                             args_.count * sizeof(float)) == nullptr) {
      return ncclSystemError;
    }
    p_ = factors;
    q_ = p_ + p_floats();
    q_local_ = q_ + q_floats();
    q_sum_ = q_local_ + q_floats();
    host_p_ = host;
    host_q_ = host_p_ + p_floats();
    host_q_local_ = host_q_ + q_floats();
    host_q_sum_ = host_q_local_ + q_floats();
    return ncclSuccess;
  }

  LowRankStep step(LowRankOp op, float* q, float* out = nullptr) const {
    LowRankStep step;
    step.op = op;
    step.m = m_;
    step.p = p_;
    step.q = q;
    step.out = out;
    step.rows = rows_;
    step.cols = cols_;
    step.rank = r_;
    return step;
  }

  // One power iteration.
  ncclResult_t iterate(int iteration) {
    auto start = Clock::now();
    TERSE_CHECK(powersgd_prepare_q(host_q_, cols_, r_, args_.encode.step, Memory::kHost, nullptr));
    TERSE_CHECK(backend_.copy_from_host(context_, q_, host_q_, q_floats()));
    if (contribution_made_) {
      TERSE_CHECK(backend_.low_rank(step(LowRankOp::kComputeP, q_)));
    } else {
      // Host memory, with a residual: each block of rows of M is built and multiplied while it
      // is in cache (one pass over the tensor fewer).
      const size_t block_rows = powersgd_host_block_rows(cols_);
      for (size_t first = 0; first < rows_; first += block_rows) {
        const size_t count = std::min(block_rows, rows_ - first);
        bool finite = false;  // the factors say it too (the non-finite fallback)
        TERSE_CHECK(make_contribution_in_place(
            args_, context_, ElementRange{first * cols_, count * cols_}, &finite));
        TERSE_CHECK(powersgd_compute_p_rows(m_, DType::kFloat32, rows_, cols_, first, count, q_, r_,
                                            p_, workspace_));
      }
      contribution_made_ = true;
    }
    TERSE_CHECK(backend_.copy_to_host(context_, host_p_, p_, p_floats()));
    TERSE_CHECK(backend_.wait_messages());
    add_encode_time(start);
    TERSE_CHECK(group_allreduce_sum(host_p_, p_floats(), context_, first_step(2 * iteration)));
    start = Clock::now();
    TERSE_CHECK(backend_.copy_from_host(context_, p_, host_p_, p_floats()));
    TERSE_CHECK(backend_.low_rank(step(LowRankOp::kOrthogonalize, q_)));
    TERSE_CHECK(backend_.low_rank(step(LowRankOp::kComputeQ, q_local_)));
    TERSE_CHECK(backend_.copy_to_host(context_, host_q_local_, q_local_, q_floats()));
    TERSE_CHECK(backend_.wait_messages());
    std::memcpy(host_q_sum_, host_q_local_, q_floats() * sizeof(float));
    add_encode_time(start);
    return group_allreduce_sum(host_q_sum_, q_floats(), context_, first_step(2 * iteration + 1));
  }

  // The exact sum of the contributions, made on the host; nothing was dropped, so no residual
  // remains. On a device backend M crosses to the host and the sum back, whole.
  ncclResult_t dense_sum() {
    float* sum = backend_.result_floats(args_, context_, ScratchSlot::kAccumulator);
    float* host_sum = on_host_
                          ? sum
                          : reinterpret_cast<float*>(backend_.message_buffer(
                                context_, ScratchSlot::kIncoming, args_.count * sizeof(float)));
    if (sum == nullptr || host_sum == nullptr) return ncclSystemError;
    TERSE_CHECK(backend_.copy_to_host(context_, host_sum, m_, args_.count));
    TERSE_CHECK(backend_.wait_messages());
    TERSE_CHECK(group_allreduce_sum(host_sum, args_.count, context_,
                                    first_step(2 * parameters_.iterations)));
    TERSE_CHECK(backend_.copy_from_host(context_, sum, host_sum, args_.count));
    if (residual_ != nullptr) TERSE_CHECK(backend_.clear(residual_, args_.count));
    return backend_.write_result(args_, sum, ElementRange{0, args_.count});
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const bool on_host_;  // the backend's memory is the host's: factors need no copies
  const int n_;
  const uint32_t ring_steps_;
  const LowRankParams parameters_;
  size_t rows_ = 0;
  size_t cols_ = 0;
  int r_ = 0;
  float* m_ = nullptr;         // the contribution M: the residual's buffer when there is one
  float* residual_ = nullptr;  // this rank's residual of the call's elements, or null
  bool contribution_made_ = false;
  // The factors in the backend's memory, and their host copies (lay_out_factors).
  float* p_ = nullptr;
  float* q_ = nullptr;
  float* q_local_ = nullptr;
  float* q_sum_ = nullptr;
  float* host_p_ = nullptr;
  float* host_q_ = nullptr;
  float* host_q_local_ = nullptr;
  float* host_q_sum_ = nullptr;
  PowerSgdWorkspace* workspace_ = nullptr;
  PowerSgdWorkspace own_workspace_;  // only when the tensor keeps no state
};

}  // namespace

ncclResult_t powersgd_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ExecutionBackend& backend = backend_of(context);
  const ncclResult_t result = DistributedPowerSgd(args, context, backend).run();
  // Whatever the run returned: device work it enqueued may still read the call's buffers.
  const ncclResult_t finished = backend.finish();
  return result != ncclSuccess ? result : finished;
}

}  // namespace terse
