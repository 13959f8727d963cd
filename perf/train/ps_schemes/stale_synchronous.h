// Stale synchronous parallel (Ho et al., "More Effective Distributed ML via a Stale Synchronous
// Parallel Parameter Server", 2013): every worker pushes its update each step and may then run
// at most `staleness` steps ahead of the slowest worker, the bound enforced by the servers' step
// clocks (tersePsClock). staleness 0 is synchronous training.
//
// The worker's model is the centre: after each step it pushes its optimizer's update (the change
// of its values since the last step, times `push_scale`; the trainer passes 1 / nranks, so that
// staleness 0 takes the ranks' mean step as a gradient allreduce does), tells every tensor's
// owners it completed step t + 1 (tersePsClock(handle, t + 1, staleness)), waits until every
// worker completed at least t + 1 - staleness steps, and then receives the centre into its
// values. Its pushes precede its clock at every owner (a client's requests to one owner are
// applied in order), so the values it receives at the end of step t hold every worker's updates
// of steps 0 .. t - staleness, its own of every step, and whatever of the others' later steps
// has arrived (SSP's reads may be fresher than the bound): at most up to step t + 1 + staleness,
// since a worker pushes step t' only after its clock t' completed. With staleness 0 no worker
// starts step t + 1 before every worker pushed step t; a worker that already went on may have
// pushed step t + 1 before a slower one reads, so the workers' models can differ by that.
//
// Cadence (t counts steps from 0; step t ends in step()): push, clock t + 1, wait, receive, wait;
// every tensor's request of one kind is issued before any is waited for.
#pragma once

#include <vector>

#include "perf/train/ps_schemes/pending_requests.h"
#include "perf/train/ps_schemes/update_scheme.h"

namespace terse {
namespace ps {

struct StaleSynchronousSettings {
  uint64_t staleness = 0;
  float push_scale = 1.0f;
};

class StaleSynchronous : public UpdateScheme {
 public:
  StaleSynchronous(const std::vector<SchemeTensor>& tensors,
                   const StaleSynchronousSettings& settings);
  ncclResult_t start() override { return ncclSuccess; }
  ncclResult_t step() override;
  // Every request of a step is waited for within it: nothing is in flight between steps.
  ncclResult_t flush() override { return pushes_.wait_all(); }

 private:
  struct Tensor {
    SchemeTensor tensor;
    std::vector<float> previous;  // the values when the last step() returned
    std::vector<float> outgoing;  // push_scale * the step's update, as pushed
  };
  StaleSynchronousSettings settings_;
  std::vector<Tensor> tensors_;
  PendingRequests pushes_;
};

}  // namespace ps
}  // namespace terse
