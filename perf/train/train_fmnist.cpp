// train_fmnist: data-parallel training of a small model on Fashion-MNIST over terse, to see
// whether compressed gradients still learn (issue 14; perf/convergence.sh runs the study).
//
//   train_fmnist --epochs 10 --ranks 4 --model mlp --json run.json        # ranks as threads
//   TERSE_CODEC=int8 perf/launch.sh 4 build/perf/train_fmnist --epochs 10  # ranks as processes
//
// Launches as the perf binaries do (perf/nccl_tests/launch_plan.h): alone, under mpirun, or
// torchrun style, each process running --ranks / processes ranks as threads.
#include <cblas.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "perf/nccl_tests/launch_plan.h"
#include "perf/nccl_tests/mpi_launch.h"
#include "perf/train/epoch_report.h"
#include "perf/train/fashion_mnist.h"
#include "perf/train/rank_training.h"
#include "perf/train/train_options.h"

namespace {

using terse::perf::Launcher;
using terse::perf::LaunchPlan;
using namespace terse::train;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

void check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  const char* reason = ncclGetLastError(nullptr);
  fprintf(stderr, "train_fmnist: %s failed: %s (%s)\n", call, ncclGetErrorString(result),
          reason ? reason : "");
  exit(kExitFailed);
}

// The job's id: rank 0 makes it and MPI broadcasts it, or every process derives it from
// torchrun's address, or this process alone makes it.
ncclUniqueId unique_id(const LaunchPlan& plan, int process) {
  ncclUniqueId id{};
  if (plan.launcher == Launcher::kMpi) {
    if (process == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    terse::perf::mpi_broadcast_unique_id(&id);
    return id;
  }
  if (plan.launcher == Launcher::kTorchrun && !plan.comm_id.empty()) {
    setenv("TERSE_COMM_ID", plan.comm_id.c_str(), 1);
  }
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return id;
}

std::string environment(const char* name) {
  const char* value = getenv(name);
  return value ? value : "";
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  TrainOptions options;
  std::string error;
  switch (parse_train_options(argc, argv, &options, &error)) {
    case ParseOutcome::kHelp:
      fputs(train_usage("train_fmnist").c_str(), stdout);
      return kExitOk;
    case ParseOutcome::kError:
      fprintf(stderr, "train_fmnist: %s (--help lists the options)\n", error.c_str());
      return kExitUsage;
    case ParseOutcome::kRun:
      break;
  }
  LaunchPlan plan;
  if (!terse::perf::plan_launch(getenv, terse::perf::built_with_mpi(), &plan, &error)) {
    fprintf(stderr, "train_fmnist: %s\n", error.c_str());
    return kExitUsage;
  }
  int process = plan.process;
  int processes = plan.processes;
  const bool mpi = plan.launcher == Launcher::kMpi;
  if (mpi) terse::perf::mpi_start(&argc, &argv, &process, &processes);
  const int nranks = options.ranks > 0 ? options.ranks : processes;
  if (nranks % processes != 0) {
    fprintf(stderr,
            "train_fmnist: --ranks %d is not a multiple of the %d processes of this %s job\n",
            nranks, processes, terse::perf::launcher_name(plan.launcher));
    return kExitUsage;
  }
  const int threads = nranks / processes;
  // The ranks are the parallelism: OpenBLAS's own threads would only contend with them.
  openblas_set_num_threads(1);

  ImageSet train_set, test_set;
  if (!load_fashion_mnist(options.data_dir, &train_set, &test_set, &error)) {
    fprintf(stderr, "train_fmnist: --data %s: %s\n", options.data_dir.c_str(), error.c_str());
    return kExitFailed;
  }
  const int steps = steps_per_epoch(options, train_set.count, nranks);
  if (steps < 1) {
    fprintf(stderr, "train_fmnist: --batch %d x %d ranks is more than the %d training images\n",
            options.batch, nranks, train_set.count);
    return kExitUsage;
  }

  EpochReport report;
  if (process == 0) {
    RunDescription run{options.model,
                       nranks,
                       options.epochs,
                       options.batch,
                       steps,
                       options.learning_rate,
                       options.momentum,
                       options.seed,
                       environment("TERSE_CODEC"),
                       environment("TERSE_POLICY"),
                       terse::perf::launcher_name(plan.launcher),
                       options.sync.describe()};
    if (!report.open(run, options.json_path, !mpi, &error)) {
      fprintf(stderr, "train_fmnist: %s\n", error.c_str());
      return kExitUsage;
    }
    printf(
        "# train_fmnist: %s, %d ranks (%s), %d steps of %d x %d samples per epoch, lr %g, "
        "momentum %g, seed %llu, TERSE_CODEC=%s TERSE_POLICY=%s, sync %s\n",
        options.model.c_str(), nranks, terse::perf::launcher_name(plan.launcher), steps, nranks,
        options.batch, options.learning_rate, options.momentum,
        static_cast<unsigned long long>(options.seed), environment("TERSE_CODEC").c_str(),
        environment("TERSE_POLICY").c_str(), options.sync.describe().c_str());
  }

  const ncclUniqueId id = unique_id(plan, process);
  std::vector<ncclComm_t> comms(static_cast<size_t>(threads), nullptr);
  // One thread creates every rank of this process: inside a group they meet at ncclGroupEnd.
  check(ncclGroupStart(), "ncclGroupStart");
  for (int slot = 0; slot < threads; ++slot) {
    check(ncclCommInitRank(&comms[static_cast<size_t>(slot)], nranks, id, process * threads + slot),
          "ncclCommInitRank");
  }
  check(ncclGroupEnd(), "ncclGroupEnd (communicator creation)");

  const RankJob job{options, train_set, test_set, nranks, nullptr};
  std::vector<std::thread> ranks;
  for (int slot = 0; slot < threads; ++slot) {
    const int rank = process * threads + slot;
    RankJob mine = job;
    if (rank == 0) mine.report = &report;
    ranks.emplace_back(
        [mine, comm = comms[static_cast<size_t>(slot)], rank] { train_rank(mine, comm, rank); });
  }
  for (std::thread& rank : ranks) rank.join();
  for (ncclComm_t comm : comms) check(ncclCommDestroy(comm), "ncclCommDestroy");
  if (mpi) terse::perf::mpi_finish();
  return kExitOk;
}
