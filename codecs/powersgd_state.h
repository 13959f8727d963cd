// PowerSGD's per-tensor state: the warm-started Q (cols x rank, column-major fp32) that the
// next step starts its power iteration from, plus the scratch of the steps. Q starts as the
// initial Q of step 0 (powersgd_math.h), so every rank's fresh state holds the same Q.
//
// Q lives where the last step ran: a state used on the host and then on the device (or back)
// copies Q across once, on the first call on the other side.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

#include "codecs/codec.h"
#include "codecs/powersgd.h"

namespace terse {

class PowerSgdState final : public CodecState, public LowRankFactors {
 public:
  PowerSgdState(size_t rows, size_t cols, int rank);
  PowerSgdState(const PowerSgdState&) = delete;
  PowerSgdState& operator=(const PowerSgdState&) = delete;
  ~PowerSgdState() override;

  size_t rows() const override { return rows_; }
  size_t cols() const override { return cols_; }
  int rank() const override { return rank_; }
  size_t bytes() const override;
  LowRankFactors* low_rank_factors() override { return this; }

  // Q in `memory`, current (copied from the other side first when the last step ran there),
  // for the caller to read and update in place; device copies are ordered on `stream`.
  ncclResult_t q(Memory memory, void* stream, float** q) override;

  PowerSgdWorkspace& workspace() override { return workspace_; }

 private:
  size_t rows_;
  size_t cols_;
  int rank_;
  std::vector<float> host_q_;
  float* device_q_ = nullptr;
  Memory q_location_ = Memory::kHost;
  [[maybe_unused]] void* device_stream_ = nullptr;  // the stream of the last device call
  PowerSgdWorkspace workspace_;
};

}  // namespace terse
