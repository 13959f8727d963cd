// One rank's training: its model (the same initial weights on every rank), its shard of every
// step's samples, the gradient averaging through terse or a parameter-server update scheme
// (--sync), SGD, and at the end of each epoch the test accuracy and traffic summed over the
// ranks (rank 0 reports them).
#pragma once

#include <nccl.h>

#include "perf/train/epoch_report.h"
#include "perf/train/fashion_mnist.h"
#include "perf/train/train_options.h"

namespace terse {
namespace train {

struct RankJob {
  const TrainOptions& options;
  const ImageSet& train;
  const ImageSet& test;
  int nranks;
  EpochReport* report;  // rank 0's; null on the others
};

// Training steps per epoch: the training set split into steps of nranks x batch samples,
// capped by --steps.
int steps_per_epoch(const TrainOptions& options, int train_count, int nranks);

// Runs every epoch. A failing NCCL call ends the process with a message naming the rank and the
// call (the other ranks would wait for it until TERSE_TIMEOUT_S).
void train_rank(const RankJob& job, ncclComm_t comm, int rank);

}  // namespace train
}  // namespace terse
