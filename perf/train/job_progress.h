// How far the whole job is through an epoch when the ranks do not wait for one another (--sync
// downpour or easgd): a rank that is faster should take more of the epoch's batches rather than
// idle at its end, or asynchrony gains nothing over a straggler. Each rank counts its steps into
// a parameter-server tensor of one element per rank (tersePsAdd at its own index, exact; a step
// made while its last push is on its way goes with the next) and reads the job's total back
// with a receive that it polls, never waits for, during the epoch: an epoch ends for a rank once
// the total it has seen reaches the epoch's nranks x steps batches. The total it sees lags by the
// requests in flight, so the job overshoots by a few steps, which count towards the next epoch (the
// target is cumulative).
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <cstdint>
#include <vector>

namespace terse {
namespace train {

class JobProgress {
 public:
  JobProgress(ncclComm_t comm, int rank, int nranks);
  ~JobProgress();
  // Collective: the tensor "train.progress", always exact (push and receive codec "none").
  ncclResult_t init();
  // One more step of this rank: pushed, and the total refreshed when a receive has completed.
  ncclResult_t count_step();
  // The job's steps as last seen.
  uint64_t total_seen() const { return total_seen_; }
  // Waits for this rank's requests; after every rank flushed and a barrier, refresh() reads the
  // exact total.
  ncclResult_t flush();
  ncclResult_t refresh();
  // Collective.
  ncclResult_t free();

 private:
  ncclComm_t comm_;
  int rank_;
  int nranks_;
  tersePsHandle_t handle_ = nullptr;
  std::vector<float> outgoing_;  // this rank's uncounted steps at its index, 0 elsewhere
  std::vector<float> received_;
  tersePsRequest_t push_ = nullptr;
  tersePsRequest_t receive_ = nullptr;
  uint64_t uncounted_ = 0;  // steps not pushed yet
  uint64_t total_seen_ = 0;

  void take_received();
  // Whether *request finished (true too when none is outstanding), releasing it if so.
  ncclResult_t poll(tersePsRequest_t* request, bool* done);
  ncclResult_t push_uncounted();
};

}  // namespace train
}  // namespace terse
