#include "perf/nccl_tests/perf_main.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "perf/nccl_tests/buffer_memory.h"
#include "perf/nccl_tests/compression_figures.h"
#include "perf/nccl_tests/device_report.h"
#include "perf/nccl_tests/device_runtime.h"
#include "perf/nccl_tests/json_report.h"
#include "perf/nccl_tests/launch_plan.h"
#include "perf/nccl_tests/mpi_launch.h"
#include "perf/nccl_tests/options.h"
#include "perf/nccl_tests/rank_buffers.h"
#include "perf/nccl_tests/rank_context.h"
#include "perf/nccl_tests/result_table.h"
#include "perf/nccl_tests/row_sweep.h"
#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {
namespace {

// What one rank thread leaves for the main thread.
struct RankOutcome {
  SweepTotals totals;
  int64_t failed_checks_everywhere = 0;  // summed over every rank of the job
};

// Everything a rank thread needs besides its own communicator.
struct Job {
  const Options& options;
  const CollectiveTest& test;
  const LaunchPlan& plan;
  int process;
  int nranks;
  JsonReport* json;                 // null unless this process prints and -J was given
  const std::vector<int>& devices;  // each rank thread's GPU; empty with host buffers
};

// With device buffers: this rank thread's GPU made current, and a stream of its own on it.
void* open_rank_stream(int device, int rank) {
  std::string why;
  void* stream = nullptr;
  if (!cuda_select_device(device, &why) || !cuda_create_stream(&stream, &why)) {
    abort_run(kExitNoMemory, short_host_name() + ": rank " + std::to_string(rank) + ": " + why);
  }
  return stream;
}

void run_rank(const Job& job, ncclComm_t comm, int slot, RankOutcome* outcome) {
  const Options& options = job.options;
  const int rank = job.process * options.threads + slot;
  const bool prints = rank == 0;
  const bool on_gpu = !job.devices.empty();
  const int device = on_gpu ? job.devices[static_cast<size_t>(slot)]
                            : job.plan.local_rank * options.threads + slot;
  void* stream = on_gpu ? open_rank_stream(device, rank) : nullptr;
  RankContext context{
      options,       job.test,
      comm,          rank,
      job.nranks,    slot,
      RankBuffers{}, RankSync(comm, rank, job.nranks, slot),
      prints,        prints ? job.json : nullptr,
      stream,
  };
  std::string gpu;
  if (on_gpu) {
    gpu = cuda_device_description(device);
    if (options.memory == BufferMemory::kManaged) gpu += " (managed memory)";
  }
  report_devices(context, device, gpu);

  // Every rank must sweep the same sizes: agree on the smallest memory limit of any process.
  size_t max_bytes = options.max_bytes;
  const double limit = context.sync.min(static_cast<double>(memory_limited_bytes(options.threads)));
  if (limit < static_cast<double>(max_bytes)) {
    max_bytes = static_cast<size_t>(limit);
    if (context.prints) {
      printf("#\n# Reducing maxBytes to %zu due to memory limitation\n", max_bytes);
    }
  }
  const size_t min_bytes = std::min(options.min_bytes, max_bytes);
  context.buffers = RankBuffers::allocate(options.memory, max_bytes, stream, slot);
  if (!context.buffers.allocated()) {
    abort_run(kExitNoMemory, short_host_name() + ": cannot allocate 2 x " +
                                 std::to_string(max_bytes) + " bytes of " +
                                 buffer_memory_name(options.memory) + " memory for rank " +
                                 std::to_string(rank));
  }
  if (context.prints) {
    fputs(column_header(compression_requested()).c_str(), stdout);
    fflush(stdout);
  }
  outcome->totals = run_rows(context, min_bytes, max_bytes);
  outcome->failed_checks_everywhere = context.sync.sum(outcome->totals.failed_checks);
}

ncclUniqueId make_unique_id(const LaunchPlan& plan, int process) {
  ncclUniqueId id{};
  switch (plan.launcher) {
    case Launcher::kMpi:
      if (process == 0) TERSE_PERF_NCCL(ncclGetUniqueId(&id));
      mpi_broadcast_unique_id(&id);
      break;
    case Launcher::kTorchrun:
      // Every process derives the same id from the address; rank 0 starts the root there.
      if (!plan.comm_id.empty()) setenv("TERSE_COMM_ID", plan.comm_id.c_str(), 1);
      TERSE_PERF_NCCL(ncclGetUniqueId(&id));
      break;
    case Launcher::kThreads:
      TERSE_PERF_NCCL(ncclGetUniqueId(&id));
      break;
  }
  return id;
}

std::string program_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

int run_perf(int argc, char** argv, const CollectiveTest& test) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // every row appears as it completes
  const std::string program = program_name(argv[0]);
  Options options;
  std::string error;
  switch (parse_options(argc, argv, &options, &error)) {
    case ParseOutcome::kHelp:
      fputs(usage_text(program).c_str(), stdout);
      return kExitOk;
    case ParseOutcome::kError:
      fprintf(stderr, "%s: %s\n%s: -h lists the options\n", program.c_str(), error.c_str(),
              program.c_str());
      return kExitUsage;
    case ParseOutcome::kRun:
      break;
  }
  // -Z: the one-rule policy, read by every communicator this process creates.
  if (!options.codec.empty()) setenv("TERSE_CODEC", options.codec.c_str(), 1);
  LaunchPlan plan;
  if (!resolve_buffer_memory(&options.memory, &error) ||
      !plan_launch(getenv, built_with_mpi(), &plan, &error)) {
    fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return kExitUsage;
  }
  // Each rank thread's GPU, known before the communicators: a communicator's device is the one
  // current when it is created.
  std::vector<int> devices;
  for (int slot = 0; options.memory != BufferMemory::kHost && slot < options.threads; ++slot) {
    int device = 0;
    if (!rank_device(plan.local_rank, options.threads, slot, &device, &error)) {
      fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
      return kExitUsage;
    }
    devices.push_back(device);
  }
  int process = plan.process;
  int processes = plan.processes;
  if (plan.launcher == Launcher::kMpi) mpi_start(&argc, &argv, &process, &processes);
  const bool mpi = plan.launcher == Launcher::kMpi;
  const int nranks = processes * options.threads;
  const bool prints = process == 0;
  if (test.uses_root && options.root >= nranks) {
    if (prints) {
      fprintf(stderr, "%s: -r %d is not a rank of this job (%d ranks)\n", program.c_str(),
              options.root, nranks);
    }
    if (mpi) mpi_finish();
    return kExitUsage;
  }
  JsonReport json;
  if (prints && !options.json_path.empty() && !json.open(options.json_path, &error)) {
    fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    abort_run(kExitUsage, "# no run: the JSON file cannot be written");
  }

  int version = 0;
  ncclGetVersion(&version);
  if (prints) {
    if (json.is_open()) printf("# Writing JSON output to %s\n", options.json_path.c_str());
    RunDescription run;
    run.program = program;
    run.nccl_version = version;
    run.threads = options.threads;
    run.gpus = options.gpus;
    run.min_bytes = options.min_bytes;
    run.max_bytes = options.max_bytes;
    run.step_bytes = options.step_bytes;
    run.step_factor = options.step_factor;
    run.warmup_iters = options.warmup_iters;
    run.iters = options.iters;
    run.agg_iters = options.agg_iters;
    run.check = options.check;
    run.blocking = options.blocking;
    fputs(run_header(run).c_str(), stdout);
    fflush(stdout);
  }

  start_watchdog(options.timeout_s, options.threads);
  const ncclUniqueId id = make_unique_id(plan, process);
  std::vector<ncclComm_t> comms(static_cast<size_t>(options.threads), nullptr);
  {
    // One thread creates every rank of this process: inside a group they meet at ncclGroupEnd.
    CallTimer timer(0, "ncclCommInitRank");
    TERSE_PERF_NCCL(ncclGroupStart());
    for (int slot = 0; slot < options.threads; ++slot) {
      std::string why;
      if (!devices.empty() && !cuda_select_device(devices[static_cast<size_t>(slot)], &why)) {
        abort_run(kExitNoMemory, short_host_name() + ": " + why);
      }
      TERSE_PERF_NCCL(ncclCommInitRank(&comms[static_cast<size_t>(slot)], nranks, id,
                                       process * options.threads + slot));
    }
    TERSE_PERF_NCCL(ncclGroupEnd());
  }
  set_abortable_communicators(comms);

  const Job job{options, test, plan, process, nranks, json.is_open() ? &json : nullptr, devices};
  std::vector<RankOutcome> outcomes(comms.size());
  std::vector<std::thread> threads;
  for (int slot = 0; slot < options.threads; ++slot) {
    threads.emplace_back(run_rank, std::cref(job), comms[static_cast<size_t>(slot)], slot,
                         &outcomes[static_cast<size_t>(slot)]);
  }
  for (std::thread& thread : threads) thread.join();
  set_abortable_communicators({});
  for (ncclComm_t comm : comms) TERSE_PERF_NCCL(ncclCommDestroy(comm));

  const RankOutcome& outcome = outcomes[0];
  const double avg_busbw =
      outcome.totals.busbw_count > 0 ? outcome.totals.busbw_sum / outcome.totals.busbw_count : 0.0;
  const char* min_text = getenv("NCCL_TESTS_MIN_BW");
  const double min_busbw = min_text ? atof(min_text) : -1.0;
  if (prints) {
    fputs(footer(outcome.failed_checks_everywhere, avg_busbw, min_busbw, program).c_str(), stdout);
    const char* last_error = ncclGetLastError(nullptr);
    if (last_error != nullptr && *last_error != '\0') {
      printf("# error: %s\n", last_error);
    } else {
      printf("\n");
    }
    fflush(stdout);
    RunIdentity identity{program,   options.command_line, nranks,
                         processes, options.threads,      launcher_name(plan.launcher)};
    json.finish(identity, outcome.failed_checks_everywhere, avg_busbw);
  }
  if (mpi) mpi_finish();
  const bool too_slow = min_busbw >= 0 && avg_busbw < 0.9 * min_busbw;
  return outcome.failed_checks_everywhere != 0 || too_slow ? kExitWrongResults : kExitOk;
}

}  // namespace perf
}  // namespace terse
