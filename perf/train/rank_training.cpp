#include "perf/train/rank_training.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "perf/train/gradient_allreduce.h"
#include "perf/train/job_progress.h"
#include "perf/train/model.h"
#include "perf/train/parameter_digest.h"
#include "perf/train/parameter_server_sync.h"
#include "perf/train/rank_reduce.h"
#include "perf/train/seeded_random.h"
#include "perf/train/sgd.h"
#include "perf/train/softmax_cross_entropy.h"
#include "perf/train/traffic_meter.h"

namespace terse {
namespace train {
namespace {

constexpr int kEvalBatch = 250;
constexpr int kProgressEverySteps = 10;

void check(ncclResult_t result, int rank, const char* call) {
  if (result == ncclSuccess) return;
  const char* reason = ncclGetLastError(nullptr);
  fprintf(stderr, "train_fmnist: rank %d: %s failed: %s (%s)\n", rank, call,
          ncclGetErrorString(result), reason ? reason : "");
  fflush(stderr);
  _exit(1);
}

// Images of the test set with index = rank mod nranks: correct predictions and how many.
void evaluate(Model* model, const ImageSet& test, int rank, int nranks, double* correct,
              double* tested) {
  std::vector<int> mine;
  for (int i = rank; i < test.count; i += nranks) mine.push_back(i);
  std::vector<float> images(static_cast<size_t>(kEvalBatch) * kImagePixels);
  std::vector<uint8_t> labels(kEvalBatch);
  for (size_t first = 0; first < mine.size(); first += kEvalBatch) {
    const int batch = static_cast<int>(std::min<size_t>(kEvalBatch, mine.size() - first));
    for (int b = 0; b < batch; ++b) {
      const int index = mine[first + static_cast<size_t>(b)];
      std::copy_n(test.image(index), kImagePixels, images.begin() + b * kImagePixels);
      labels[static_cast<size_t>(b)] = test.labels[static_cast<size_t>(index)];
    }
    const std::vector<float>& logits = model->forward(images.data(), batch);
    *correct += softmax_cross_entropy(logits, labels.data(), batch, kClasses, nullptr).correct;
    *tested += batch;
  }
}

// Ends the run when the ranks' parameters differ (parameter_digest.h says why that matters).
void check_ranks_agree(ncclComm_t comm, const std::vector<Parameter*>& parameters, int rank,
                       int epoch) {
  const double digest = parameter_digest(parameters);
  std::vector<double> lowest = {digest}, highest = {digest};
  check(reduce_over_ranks(comm, ncclMin, &lowest), rank, "terseAllReduceTensor (digest)");
  check(reduce_over_ranks(comm, ncclMax, &highest), rank, "terseAllReduceTensor (digest)");
  if (lowest[0] == highest[0]) return;
  fprintf(stderr,
          "train_fmnist: rank %d: after epoch %d the ranks hold different parameters (digests "
          "from %.17g to %.17g): the gradient allreduce did not give every rank the same "
          "average\n",
          rank, epoch, lowest[0], highest[0]);
  fflush(stderr);
  _exit(1);
}

// Returns once every rank called it (an allreduce of nothing much).
void barrier(ncclComm_t comm, int rank) {
  std::vector<double> nothing = {0.0};
  check(reduce_over_ranks(comm, ncclSum, &nothing), rank, "terseAllReduceTensor (barrier)");
}

}  // namespace

int steps_per_epoch(const TrainOptions& options, int train_count, int nranks) {
  const int steps = train_count / (nranks * options.batch);
  return options.max_steps > 0 ? std::min(steps, options.max_steps) : steps;
}

void train_rank(const RankJob& job, ncclComm_t comm, int rank) {
  const TrainOptions& options = job.options;
  const SyncScheme& sync = options.sync;
  std::unique_ptr<Model> model = make_model(options.model, options.seed);
  std::vector<Parameter*> parameters = model->parameters();
  GradientAllreduce gradients(comm, parameters);
  std::vector<float> momentum(parameters.size(), options.momentum);
  for (size_t i = 0; i < parameters.size(); ++i) {
    ncclResult_t result = ncclSuccess;
    // Parameter-server pushes refuse dgc (tersePsTensorDesc): its momentum is the allreduce's.
    if (!sync.uses_parameter_server() && gradients.uses_dgc(i, &result)) momentum[i] = 0.0f;
    check(result, rank, "terseCommDecide");
    if (momentum[i] == 0.0f && options.momentum > 0.0f && job.report != nullptr) {
      printf("# %s: dgc's momentum correction replaces the optimizer's momentum\n",
             parameters[i]->name.c_str());
    }
  }

  const int steps = steps_per_epoch(options, job.train.count, job.nranks);
  const int batch = options.batch;
  std::vector<float> images(static_cast<size_t>(batch) * kImagePixels);
  std::vector<uint8_t> labels(static_cast<size_t>(batch));
  std::vector<float> dlogits;
  TrafficMeter traffic(comm);
  // Every rank starts from the same values (one seed), which become the centre.
  std::unique_ptr<ParameterServerSync> server;
  if (sync.uses_parameter_server()) {
    server = std::make_unique<ParameterServerSync>(comm, parameters, sync, job.nranks);
    check(server->init(), rank, "tersePsInitList (parameters)");
    // The parameters' pushes and fetches are the model's traffic (traffic_meter.h); the
    // progress counter's below are bookkeeping and are left out.
    traffic.add_ps_handles(server->handles());
  }
  check(traffic.start(), rank, "terseCommGetStats/tersePsGetStats");
  std::unique_ptr<JobProgress> progress;
  if (sync.asynchronous()) {
    progress = std::make_unique<JobProgress>(comm, rank, job.nranks);
    check(progress->init(), rank, "tersePsInitList (train.progress)");
  }
  // The batches of an epoch: step s of rank r takes batch s * nranks + r. Asynchronous ranks take
  // batches until the job has done them all (job_progress.h), a fast rank wrapping around to its
  // first ones again while a slow one leaves some of its own for the next epoch's shuffle.
  const uint64_t epoch_batches = static_cast<uint64_t>(steps) * job.nranks;
  uint64_t job_target = 0;

  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    // The same order on every rank; step s gives rank r the samples
    // order[(s * nranks + r) * batch, ... + batch).
    const std::vector<int> order =
        SeededRandom(options.seed * 1000003u + static_cast<uint64_t>(epoch))
            .permutation(job.train.count);
    const auto started = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    job_target += epoch_batches;
    int step = 0;
    for (;; ++step) {
      if (progress ? progress->total_seen() >= job_target : step >= steps) break;
      const uint64_t batch_index =
          (static_cast<uint64_t>(step) * job.nranks + rank) % epoch_batches;
      const size_t first = static_cast<size_t>(batch_index) * batch;
      for (int b = 0; b < batch; ++b) {
        const int index = order[first + static_cast<size_t>(b)];
        std::copy_n(job.train.image(index), kImagePixels, images.begin() + b * kImagePixels);
        labels[static_cast<size_t>(b)] = job.train.labels[static_cast<size_t>(index)];
      }
      const std::vector<float>& logits = model->forward(images.data(), batch);
      loss_sum += softmax_cross_entropy(logits, labels.data(), batch, kClasses, &dlogits).loss;
      model->backward(dlogits, batch);
      if (!server) check(gradients.average(), rank, "terseAllReduceTensor");
      for (size_t i = 0; i < parameters.size(); ++i) {
        sgd_step(parameters[i], options.learning_rate, momentum[i]);
      }
      if (server) check(server->step(), rank, "tersePs* (update scheme step)");
      if (progress) check(progress->count_step(), rank, "tersePs* (train.progress)");
      if (job.report != nullptr && (step + 1) % kProgressEverySteps == 0) {
        job.report->progress(epoch, step + 1, steps, loss_sum / (step + 1));
      }
    }
    // The epoch ends when every rank has done its steps and, for the parameter server, every
    // push has been applied: its time includes the wait for the slowest rank.
    if (server) check(server->flush(), rank, "tersePs* (update scheme flush)");
    if (progress) check(progress->flush(), rank, "tersePs* (train.progress)");
    // After the flush, whose last pushes and fetches are the epoch's traffic; before the
    // barrier's own allreduce and the centre's fetch for evaluation, which are not.
    Traffic sent;
    check(traffic.read(&sent), rank, "terseCommGetStats/tersePsGetStats");
    barrier(comm, rank);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (progress) check(progress->refresh(), rank, "tersePs* (train.progress)");
    // The parameter server's model is the centre: every rank evaluates it (the same values after
    // the barrier), then goes on from its own.
    if (server) check(server->load_centre(), rank, "tersePsReceive (centre)");
    double correct = 0.0, tested = 0.0;
    evaluate(model.get(), job.test, rank, job.nranks, &correct, &tested);
    std::vector<double> sums = {loss_sum,
                                static_cast<double>(step),
                                correct,
                                tested,
                                static_cast<double>(sent.wire_bytes),
                                static_cast<double>(sent.dense_wire_bytes)};
    check(reduce_over_ranks(comm, ncclSum, &sums), rank, "terseAllReduceTensor (metrics)");
    check_ranks_agree(comm, parameters, rank, epoch);
    if (server) server->restore_worker_values();
    // The metrics' own allreduce is not gradient traffic: the next epoch counts from here.
    check(traffic.start(), rank, "terseCommGetStats/tersePsGetStats");
    if (job.report == nullptr) continue;
    EpochFigures figures;
    figures.epoch = epoch;
    figures.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    figures.test_accuracy = sums[3] > 0 ? sums[2] / sums[3] : 0.0;
    figures.wire_bytes = static_cast<uint64_t>(sums[4]);
    figures.dense_wire_bytes = static_cast<uint64_t>(sums[5]);
    figures.seconds = seconds;
    job.report->epoch_done(figures);
  }
  if (progress) check(progress->free(), rank, "tersePsFree (train.progress)");
  if (server) check(server->free(), rank, "tersePsFree (parameters)");
}

}  // namespace train
}  // namespace terse
