// allreduce_soak: many compressed allreduces over mixed codecs and tensor names on N processes,
// checking every result, and whether what a process holds stays flat (perf/README.md, "Soak").
//
//   allreduce_soak [--calls N] [--ranks R] [--warmup F] [--max-growth P] [--rss-slack-kb K]
//                  [--memory-cap BYTES] [--idle-steps S] [--progress LINES] [--csv DIR]
//
// Defaults: 100,000 calls (rounded up to whole checkpoint periods of 400), 4 ranks (2 to 8),
// warm-up 0.2 of the calls, growth limit 5%, no RSS slack, cap 2M, 2 idle steps, 10 progress
// lines from rank 0; --csv writes DIR/soak_rank<r>.csv, one row per checkpoint.
//
// Without --rank it is the launcher: it sets the residual memory's cap and idle steps for the
// job (TERSE_MEMORY_MAX_BYTES, TERSE_MEMORY_IDLE_STEPS), makes the unique id (its bootstrap root
// listens in this process), and runs R copies of itself as ranks 0..R-1 (soak/rank_launch.h).
// Each rank makes the calls of soak/soak_workload.h, checks every output (soak/soak_check.h),
// and at every checkpoint (every 400 calls) samples its RSS, heap in use, threads, open
// descriptors and residual memory (soak/process_sample.h). At the end each rank prints a JSON
// line, rank 0 a table of every rank's growths from the first checkpoint after the warm-up to the
// last, and every rank exits 0 when all results were right and every metric of every rank grew
// less than --max-growth percent (soak/flatness.h), 4 when one grew more, 3 on a wrong result,
// 2 when the communicator cannot be made, 1 on a bad command line.
#include <nccl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <terse/terse.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/dtype.h"
#include "common/hex_bytes.h"
#include "perf/soak/flatness.h"
#include "perf/soak/process_sample.h"
#include "perf/soak/rank_launch.h"
#include "perf/soak/soak_check.h"
#include "perf/soak/soak_workload.h"

namespace terse {
namespace soak {
namespace {

enum ExitCode { kOk = 0, kUsage = 1, kInitFailed = 2, kWrong = 3, kGrowth = 4 };

struct Options {
  uint64_t calls = 100000;
  int ranks = 4;
  double warmup = 0.2;
  double max_growth = 5.0;
  double rss_slack_kb = 0;
  std::string memory_cap = "2M";
  uint64_t idle_steps = 2;
  int progress = 10;
  std::string csv;
  // Set by the launcher for its ranks.
  int rank = -1;
  std::string id;
};

int usage(const char* why) {
  std::fprintf(stderr,
               "allreduce_soak: %s\nusage: allreduce_soak [--calls N] [--ranks R] [--warmup F] "
               "[--max-growth PERCENT] [--rss-slack-kb K] [--memory-cap BYTES] [--idle-steps S] "
               "[--progress LINES] [--csv DIR]\n",
               why);
  return kUsage;
}

bool parse_number(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end != text && *end == '\0' && std::isfinite(*out) && *out >= 0;
}

int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage((flag + " needs a value").c_str());
    const char* value = argv[++i];
    double number = 0;
    const bool numeric = parse_number(value, &number);
    const auto whole = [&](double low) {
      return numeric && number >= low && number == std::floor(number) && number < 1e15;
    };
    if (flag == "--calls" && whole(1)) {
      o->calls = static_cast<uint64_t>(number);
    } else if (flag == "--ranks" && whole(2) && number <= 8) {  // exact bf16 sums: 8 x 30
      o->ranks = static_cast<int>(number);
    } else if (flag == "--warmup" && numeric && number < 1) {
      o->warmup = number;
    } else if (flag == "--max-growth" && numeric && number > 0) {
      o->max_growth = number;
    } else if (flag == "--rss-slack-kb" && numeric) {
      o->rss_slack_kb = number;
    } else if (flag == "--memory-cap" && *value != '\0') {
      o->memory_cap = value;
    } else if (flag == "--idle-steps" && whole(0)) {
      o->idle_steps = static_cast<uint64_t>(number);
    } else if (flag == "--progress" && whole(0)) {
      o->progress = static_cast<int>(number);
    } else if (flag == "--csv" && *value != '\0') {
      o->csv = value;
    } else if (flag == "--rank" && whole(0)) {
      o->rank = static_cast<int>(number);
    } else if (flag == "--id") {
      o->id = value;
    } else {
      return usage((flag + " " + value + ": unknown flag or bad value").c_str());
    }
  }
  if (o->rank >= o->ranks) return usage("--rank is not below --ranks");
  return kOk;
}

// Whole checkpoint periods: every pattern of the workload repeats once per period.
uint64_t iterations_for(uint64_t calls) {
  const uint64_t periods = (calls + kCheckpointCalls - 1) / kCheckpointCalls;
  return periods * kCheckpointIterations;
}

std::string hex_of(const ncclUniqueId& id) {
  return terse::bytes_to_hex(id.internal, sizeof(id.internal));
}

bool id_of(const std::string& hex, ncclUniqueId* id) {
  return terse::hex_to_bytes(hex, id->internal, sizeof(id->internal));
}

size_t element_bytes(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclBfloat16 ? 2 : 4;
}

// A tensor's buffers, as a framework keeps its gradients: reused every iteration; a phase
// tensor gets new ones with every generation.
struct Buffers {
  std::vector<uint8_t> send, recv;
  uint64_t generation = 0;
};

void prepare(const PlannedCall& call, uint64_t iteration, int rank, Buffers* buffers) {
  const Slot& s = slot(call.slot);
  if (s.phase && call.generation != buffers->generation) {
    std::vector<uint8_t>().swap(buffers->send);
    std::vector<uint8_t>().swap(buffers->recv);
    buffers->generation = call.generation;
  }
  const size_t bytes = call.count * element_bytes(s.type);
  buffers->send.resize(bytes);
  buffers->recv.resize(bytes);
  const uint64_t seed = input_seed(call, iteration, rank);
  if (s.type == ncclInt32) {
    int32_t* send = reinterpret_cast<int32_t*>(buffers->send.data());
    for (size_t i = 0; i < call.count; ++i) {
      send[i] = static_cast<int32_t>(input_value(s.values, seed, i));
    }
    std::memset(buffers->recv.data(), 0x7f, bytes);  // 2139062143: no sum of small integers
    return;
  }
  DType dtype = DType::kFloat32;
  dtype_from_nccl(s.type, &dtype);
  for (size_t i = 0; i < call.count; ++i) {
    store_element(buffers->send.data(), dtype, i,
                  static_cast<float>(input_value(s.values, seed, i)));
  }
  std::memset(buffers->recv.data(), 0xff, bytes);  // NaN in every float type
}

ncclResult_t reduce(const PlannedCall& call, Buffers* buffers, ncclComm_t comm) {
  const Slot& s = slot(call.slot);
  const ncclRedOp_t op = s.average ? ncclAvg : ncclSum;
  if (call.name.empty()) {
    return ncclAllReduce(buffers->send.data(), buffers->recv.data(), call.count, s.type, op, comm,
                         nullptr);
  }
  terseTensor tensor{};
  tensor.name = call.name.c_str();
  tensor.codec = s.codec;
  if (s.rows > 0 && call.count % s.rows == 0) {
    tensor.ndims = 2;
    tensor.shape[0] = static_cast<int64_t>(s.rows);
    tensor.shape[1] = static_cast<int64_t>(call.count / s.rows);
  }
  return terseAllReduceTensor(buffers->send.data(), buffers->recv.data(), call.count, s.type, op,
                              &tensor, comm, nullptr);
}

// What a checkpoint records beyond the judged metrics.
struct Extra {
  uint64_t hwm_kb = 0;
  uint64_t residual_entries = 0;
  uint64_t residual_evictions = 0;
  uint64_t residual_admitted = 0;
  uint64_t residual_refused = 0;
  uint64_t fallback_calls = 0;
  uint64_t compressed_calls = 0;
};

Checkpoint take_checkpoint(uint64_t calls, double seconds, const terseStats& stats, Extra* extra) {
  const ProcessSample process = sample_process();
  Checkpoint c;
  c.calls = calls;
  c.seconds = seconds;
  c.values[kRssKb] = double(process.rss_kb);
  c.values[kHeapBytes] = double(process.heap_bytes);
  c.values[kThreads] = double(process.threads);
  c.values[kOpenFds] = double(process.fds);
  c.values[kResidualBytes] = double(stats.residual_bytes);
  extra->hwm_kb = process.hwm_kb;
  extra->residual_entries = stats.residual_entries;
  extra->residual_evictions = stats.residual_evictions;
  extra->residual_admitted = stats.residual_admitted;
  extra->residual_refused = stats.residual_refused;
  extra->fallback_calls = stats.fallback_calls;
  extra->compressed_calls = stats.compressed_calls;
  return c;
}

void print_progress(uint64_t total_calls, const Checkpoint& c, const Extra& e) {
  std::printf("# soak rank 0: %7" PRIu64 "/%" PRIu64
              " calls %8.1f s  rss %6.0f kB  heap %9.0f B"
              "  threads %2.0f  fds %3.0f  residual %8.0f B in %3" PRIu64
              " entries  (evictions %" PRIu64 ", refused %" PRIu64 ", fallback calls %" PRIu64
              ")\n",
              c.calls, total_calls, c.seconds, c.values[kRssKb], c.values[kHeapBytes],
              c.values[kThreads], c.values[kOpenFds], c.values[kResidualBytes], e.residual_entries,
              e.residual_evictions, e.residual_refused, e.fallback_calls);
  std::fflush(stdout);
}

bool write_csv(const std::string& dir, int rank, const std::vector<Checkpoint>& checkpoints,
               const std::vector<Extra>& extras) {
  const std::string path = dir + "/soak_rank" + std::to_string(rank) + ".csv";
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return false;
  std::fprintf(file, "calls,seconds");
  for (int m = 0; m < kMetricCount; ++m) std::fprintf(file, ",%s", metric_name(m));
  std::fprintf(file,
               ",hwm_kb,residual_entries,residual_evictions,residual_admitted,"
               "residual_refused,fallback_calls,compressed_calls\n");
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    const Checkpoint& c = checkpoints[i];
    const Extra& e = extras[i];
    std::fprintf(file, "%" PRIu64 ",%.3f", c.calls, c.seconds);
    for (int m = 0; m < kMetricCount; ++m) std::fprintf(file, ",%.0f", c.values[m]);
    std::fprintf(file,
                 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                 "\n",
                 e.hwm_kb, e.residual_entries, e.residual_evictions, e.residual_admitted,
                 e.residual_refused, e.fallback_calls, e.compressed_calls);
  }
  return std::fclose(file) == 0;
}

// One rank's summary as numbers, gathered to rank 0 (ncclAllGather of doubles).
enum SummaryField {
  kCalls = 0,
  kSeconds,
  kFlat,
  kBaselineCalls,
  kChecks,                                // kCheckKinds counts
  kGrowths = kChecks + kCheckKinds,       // baseline, last, peak, percent per metric
  kExtras = kGrowths + 4 * kMetricCount,  // entries, evictions, admitted, refused, fallback
  kCompressed = kExtras + 5,
  kHwm,
  kSummaryFields
};

std::vector<double> summarize(uint64_t calls, double seconds, const Verdict& verdict,
                              const std::vector<Checkpoint>& checkpoints, const Extra& last,
                              const uint64_t checks[kCheckKinds]) {
  std::vector<double> s(kSummaryFields, 0.0);
  s[kCalls] = double(calls);
  s[kSeconds] = seconds;
  s[kFlat] = verdict.flat ? 1 : 0;
  s[kBaselineCalls] = double(checkpoints[verdict.baseline_index].calls);
  for (int k = 0; k < kCheckKinds; ++k) s[kChecks + k] = double(checks[k]);
  for (int m = 0; m < kMetricCount; ++m) {
    const Growth& g = verdict.growth[m];
    s[kGrowths + 4 * m + 0] = g.baseline;
    s[kGrowths + 4 * m + 1] = g.last;
    s[kGrowths + 4 * m + 2] = g.peak;
    s[kGrowths + 4 * m + 3] = g.percent;
  }
  s[kExtras + 0] = double(last.residual_entries);
  s[kExtras + 1] = double(last.residual_evictions);
  s[kExtras + 2] = double(last.residual_admitted);
  s[kExtras + 3] = double(last.residual_refused);
  s[kExtras + 4] = double(last.fallback_calls);
  s[kCompressed] = double(last.compressed_calls);
  s[kHwm] = double(last.hwm_kb);
  return s;
}

std::string json_line(int rank, const std::vector<double>& s) {
  char text[2048];
  int n = std::snprintf(text, sizeof(text),
                        "{\"soak_rank\": %d, \"calls\": %.0f, \"seconds\": %.1f, "
                        "\"compressed_calls\": %.0f, \"baseline_calls\": %.0f, \"flat\": %s",
                        rank, s[kCalls], s[kSeconds], s[kCompressed], s[kBaselineCalls],
                        s[kFlat] != 0 ? "true" : "false");
  n += std::snprintf(text + n, sizeof(text) - n, ", \"checks\": {");
  for (int k = 0; k < kCheckKinds; ++k) {
    n += std::snprintf(text + n, sizeof(text) - n, "%s\"%s\": %.0f", k ? ", " : "",
                       check_kind_name(k), s[kChecks + k]);
  }
  n += std::snprintf(text + n, sizeof(text) - n, "}");
  for (int m = 0; m < kMetricCount; ++m) {
    n += std::snprintf(text + n, sizeof(text) - n,
                       ", \"%s\": {\"baseline\": %.0f, \"last\": %.0f, \"peak\": %.0f, "
                       "\"growth_percent\": %.3f}",
                       metric_name(m), s[kGrowths + 4 * m], s[kGrowths + 4 * m + 1],
                       s[kGrowths + 4 * m + 2], s[kGrowths + 4 * m + 3]);
  }
  std::snprintf(text + n, sizeof(text) - n,
                ", \"vm_hwm_kb\": %.0f, \"residual_entries\": %.0f, \"residual_evictions\": %.0f, "
                "\"residual_admitted\": %.0f, \"residual_refused\": %.0f, \"fallback_calls\": "
                "%.0f}",
                s[kHwm], s[kExtras], s[kExtras + 1], s[kExtras + 2], s[kExtras + 3],
                s[kExtras + 4]);
  return text;
}

void print_table(const Options& o, uint64_t iterations, const std::vector<double>& all) {
  const std::vector<double> first(all.begin(), all.begin() + kSummaryFields);
  double slowest = 0;
  for (int r = 0; r < o.ranks; ++r) slowest = std::max(slowest, all[r * kSummaryFields + kSeconds]);
  std::printf("# soak: %d ranks x %.0f allreduces (%" PRIu64
              " iterations of %d tensors) in %.1f s"
              " (%.0f calls/s per rank), every result checked\n",
              o.ranks, first[kCalls], iterations, kSlots, slowest, first[kCalls] / slowest);
  std::printf(
      "# checks per rank: exact %.0f, dense %.0f, model %.0f, finite %.0f; compressed "
      "calls %.0f\n",
      first[kChecks + kExact], first[kChecks + kDense], first[kChecks + kModel],
      first[kChecks + kFinite], first[kCompressed]);
  std::printf("# residual memory: cap %s, idle steps %" PRIu64
              "; rank 0 at the end: %.0f entries,"
              " %.0f evictions, %.0f admissions, %.0f tensors refused, %.0f fallback calls\n",
              o.memory_cap.c_str(), o.idle_steps, first[kExtras], first[kExtras + 1],
              first[kExtras + 2], first[kExtras + 3], first[kExtras + 4]);
  std::printf(
      "# growth: the last checkpoint (%.0f calls) against the first at or after the "
      "warm-up (%.0f calls, %.0f%% of the run); limit %.1f%%%s\n",
      first[kCalls], first[kBaselineCalls], 100 * o.warmup, o.max_growth,
      o.rss_slack_kb > 0
          ? (", RSS less a slack of " + std::to_string(int(o.rss_slack_kb)) + " kB").c_str()
          : "");
  std::printf("# %4s  %-15s %14s %14s %14s %9s\n", "rank", "metric", "after warm-up", "last",
              "peak", "growth");
  bool flat = true;
  for (int r = 0; r < o.ranks; ++r) {
    const double* s = &all[r * kSummaryFields];
    flat = flat && s[kFlat] != 0;
    for (int m = 0; m < kMetricCount; ++m) {
      std::printf("  %4d  %-15s %14.0f %14.0f %14.0f %+8.2f%%\n", r, metric_name(m),
                  s[kGrowths + 4 * m], s[kGrowths + 4 * m + 1], s[kGrowths + 4 * m + 2],
                  s[kGrowths + 4 * m + 3]);
    }
  }
  std::printf("# result: %s\n", flat ? "flat: every metric of every rank under the limit"
                                     : "GROWTH: see the rows over the limit");
  std::fflush(stdout);
}

int run_rank(const Options& o) {
  // A rank outlives no launcher (a test's timeout kills the launcher only).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  ncclUniqueId id;
  if (!id_of(o.id, &id)) return usage("--id is not 256 hex digits");
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, o.ranks, id, o.rank) != ncclSuccess) {
    std::fprintf(stderr, "soak rank %d: ncclCommInitRank: %s\n", o.rank, ncclGetLastError(nullptr));
    return kInitFailed;
  }
  if (terseCommSetPolicy(comm, kPolicy) != ncclSuccess) {
    std::fprintf(stderr, "soak rank %d: terseCommSetPolicy: %s\n", o.rank, ncclGetLastError(comm));
    return kInitFailed;
  }
  const uint64_t iterations = iterations_for(o.calls);
  const uint64_t total_calls = iterations * kSlots;
  const uint64_t checkpoints_total = iterations / kCheckpointIterations;
  const uint64_t progress_every =
      o.progress > 0 ? std::max<uint64_t>(1, checkpoints_total / uint64_t(o.progress)) : 0;
  std::vector<Buffers> buffers(kSlots);
  std::vector<Checkpoint> checkpoints;
  std::vector<Extra> extras;
  uint64_t checks[kCheckKinds] = {};
  terseStats before{}, after{};
  terseCommGetStats(comm, &before);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  uint64_t calls = 0;
  for (uint64_t iteration = 0; iteration < iterations; ++iteration) {
    for (int s = 0; s < kSlots; ++s) {
      const PlannedCall call = plan_call(s, iteration);
      prepare(call, iteration, o.rank, &buffers[s]);
      if (call.model_check && terseCommResetResidual(comm, call.name.c_str()) != ncclSuccess) {
        std::fprintf(stderr, "soak rank %d: terseCommResetResidual: %s\n", o.rank,
                     ncclGetLastError(comm));
        return kWrong;
      }
      if (reduce(call, &buffers[s], comm) != ncclSuccess ||
          terseCommGetStats(comm, &after) != ncclSuccess) {
        std::fprintf(stderr, "soak rank %d: iteration %" PRIu64 ", tensor '%s': %s\n", o.rank,
                     iteration, call.name.c_str(), ncclGetLastError(comm));
        return kWrong;
      }
      ++calls;
      const CallCheck check =
          check_call(call, iteration, o.rank, o.ranks, before, after, buffers[s].recv.data());
      if (!check.failure.empty()) {
        std::fprintf(stderr, "soak rank %d: wrong result: %s\n", o.rank, check.failure.c_str());
        return kWrong;
      }
      ++checks[check.kind];
      before = after;
    }
    if ((iteration + 1) % kCheckpointIterations == 0) {
      extras.emplace_back();
      checkpoints.push_back(take_checkpoint(calls, elapsed(), after, &extras.back()));
      const uint64_t index = checkpoints.size();
      if (o.rank == 0 && progress_every > 0 &&
          (index % progress_every == 0 || index == checkpoints_total || index == 1)) {
        print_progress(total_calls, checkpoints.back(), extras.back());
      }
    }
  }
  const double seconds = elapsed();
  double slack[kMetricCount] = {};
  slack[kRssKb] = o.rss_slack_kb;
  const Verdict verdict =
      judge(checkpoints, baseline_index(checkpoints, total_calls, o.warmup), o.max_growth, slack);
  for (const std::string& complaint : verdict.complaints) {
    std::fprintf(stderr, "soak rank %d: %s\n", o.rank, complaint.c_str());
  }
  if (!o.csv.empty() && !write_csv(o.csv, o.rank, checkpoints, extras)) {
    std::fprintf(stderr, "soak rank %d: cannot write %s/soak_rank%d.csv\n", o.rank, o.csv.c_str(),
                 o.rank);
  }
  const std::vector<double> mine =
      summarize(calls, seconds, verdict, checkpoints, extras.back(), checks);
  std::printf("%s\n", json_line(o.rank, mine).c_str());
  std::fflush(stdout);
  // Every rank's line was written before it joined this gather, so rank 0's table comes last.
  std::vector<double> all(kSummaryFields * size_t(o.ranks));
  if (ncclAllGather(mine.data(), all.data(), kSummaryFields, ncclFloat64, comm, nullptr) !=
      ncclSuccess) {
    std::fprintf(stderr, "soak rank %d: ncclAllGather: %s\n", o.rank, ncclGetLastError(comm));
    return kWrong;
  }
  if (o.rank == 0) print_table(o, iterations, all);
  bool flat = true;
  for (int r = 0; r < o.ranks; ++r) flat = flat && all[r * kSummaryFields + kFlat] != 0;
  if (ncclCommDestroy(comm) != ncclSuccess) {
    std::fprintf(stderr, "soak rank %d: ncclCommDestroy: %s\n", o.rank, ncclGetLastError(nullptr));
    return kWrong;
  }
  return flat ? kOk : kGrowth;
}

int launch(const Options& o, int argc, char** argv) {
  // The job's residual memory: every rank reads the same settings.
  setenv("TERSE_MEMORY_MAX_BYTES", o.memory_cap.c_str(), 1);
  setenv("TERSE_MEMORY_IDLE_STEPS", std::to_string(o.idle_steps).c_str(), 1);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "allreduce_soak: ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return kInitFailed;
  }
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < o.ranks; ++r) {
    std::vector<std::string> arguments(argv + 1, argv + argc);
    arguments.insert(arguments.end(), {"--rank", std::to_string(r), "--id", hex_of(id)});
    ranks.push_back(arguments);
  }
  return run_ranks(ranks, kGrowth);
}

}  // namespace
}  // namespace soak
}  // namespace terse

int main(int argc, char** argv) {
  terse::soak::Options options;
  const int parsed = terse::soak::parse_options(argc, argv, &options);
  if (parsed != terse::soak::kOk) return parsed;
  return options.rank < 0 ? terse::soak::launch(options, argc, argv)
                          : terse::soak::run_rank(options);
}
