// mpi_allreduce_perf: MPI_Allreduce over MPI_COMM_WORLD, measured, checked and printed as
// all_reduce_perf prints terse's ncclAllReduce (the same table, busbw = algbw * 2 (n - 1) / n,
// the same value pattern and float64 check, the same JSON), so that a script can put terse and
// the MPI library side by side:
//
//   mpirun -np 4 build/perf/mpi_allreduce_perf -b 8 -e 64M -f 2
//   mpirun -np 4 build/perf/all_reduce_perf   -b 8 -e 64M -f 2
//
// One rank per process. Flags: -b -e -f -i -n -w -c -a -J as all_reduce_perf; -d one of the
// types MPI has (int8 uint8 int32 uint32 int64 uint64 float double); -o sum, prod, max or min.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/buffer_check.h"
#include "perf/nccl_tests/json_report.h"
#include "perf/nccl_tests/options.h"
#include "perf/nccl_tests/result_table.h"
#include "perf/nccl_tests/size_sweep.h"
#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {
namespace {

constexpr const char* kAllowedFlags = "befinwcdoaJ";

bool mpi_type(ncclDataType_t type, MPI_Datatype* out) {
  switch (type) {
    case ncclInt8:
      *out = MPI_INT8_T;
      return true;
    case ncclUint8:
      *out = MPI_UINT8_T;
      return true;
    case ncclInt32:
      *out = MPI_INT32_T;
      return true;
    case ncclUint32:
      *out = MPI_UINT32_T;
      return true;
    case ncclInt64:
      *out = MPI_INT64_T;
      return true;
    case ncclUint64:
      *out = MPI_UINT64_T;
      return true;
    case ncclFloat32:
      *out = MPI_FLOAT;
      return true;
    case ncclFloat64:
      *out = MPI_DOUBLE;
      return true;
    default:
      return false;
  }
}

bool mpi_op(Reduction op, MPI_Op* out) {
  switch (op) {
    case Reduction::kSum:
      *out = MPI_SUM;
      return true;
    case Reduction::kProd:
      *out = MPI_PROD;
      return true;
    case Reduction::kMax:
      *out = MPI_MAX;
      return true;
    case Reduction::kMin:
      *out = MPI_MIN;
      return true;
    default:
      return false;
  }
}

// The buffers of one rank and what a row needs to call MPI_Allreduce on them.
struct World {
  int rank = 0;
  int nranks = 1;
  size_t capacity = 0;
  std::vector<char> send, recv;
};

// One call; `iteration` moves through the buffers as all_reduce_perf does.
void allreduce(World& world, size_t count, const DataTypeInfo& type, MPI_Datatype datatype,
               MPI_Op op, bool in_place, int iteration) {
  const size_t span = count * type.bytes;
  const size_t positions = span == 0 ? 1 : std::max<size_t>(world.capacity / span, 1);
  const size_t shift = span * (static_cast<size_t>(iteration) % positions);
  char* recv = world.recv.data() + shift;
  const void* send = in_place ? MPI_IN_PLACE : world.send.data() + shift;
  MPI_Allreduce(send, recv, static_cast<int>(count), datatype, op, MPI_COMM_WORLD);
}

double combine_time(double seconds, int average, int rank, int nranks) {
  double result = 0;
  switch (average) {
    case 0:
      result = rank == 0 ? seconds : 0.0;
      MPI_Allreduce(MPI_IN_PLACE, &result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      return result;
    case 2:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      return result;
    case 3:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return result;
    default:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      return result / nranks;
  }
}

// One half of a row, as measurement.h describes it for the NCCL binaries.
HalfResult measure(World& world, const Options& options, const DataTypeInfo& type,
                   MPI_Datatype datatype, MPI_Op op, const ValuePattern& pattern, size_t count,
                   bool in_place, int64_t* failed_checks) {
  auto prepare = [&] {
    char* input = in_place ? world.recv.data() : world.send.data();
    memset(world.recv.data(), 0, count * type.bytes);
    fill_buffer(type.type, input, count, [&](size_t i) { return pattern.input(world.rank, i); });
  };
  if (options.check > 0) prepare();
  allreduce(world, count, type, datatype, op, in_place, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int iter = 0; iter < options.iters; ++iter) {
    allreduce(world, count, type, datatype, op, in_place, iter);
  }
  const double seconds = combine_time((MPI_Wtime() - start) / options.iters, options.average,
                                      world.rank, world.nranks);
  const Bandwidth bw = bandwidth(count * type.bytes, seconds, allreduce_bus_factor(world.nranks));
  HalfResult result;
  result.time_us = seconds * 1e6;
  result.algbw = bw.algbw;
  result.busbw = bw.busbw;
  result.checked = options.check > 0;
  for (int pass = 0; pass < options.check; ++pass) {
    prepare();
    allreduce(world, count, type, datatype, op, in_place, 0);
    int64_t wrong = count_wrong(type.type, world.recv.data(), count,
                                [&](size_t i) { return pattern.reduced(i); });
    if (wrong != 0) ++*failed_checks;
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    result.wrong = wrong;
    if (wrong != 0) break;
  }
  return result;
}

void print_devices(const World& world) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  if (char* dot = strchr(host, '.')) *dot = '\0';
  char line[256] = {};
  snprintf(line, sizeof(line), "%s",
           device_line(world.rank, 0, static_cast<int>(getpid()), host, world.rank).c_str());
  std::vector<char> lines(sizeof(line) * static_cast<size_t>(world.nranks));
  MPI_Gather(line, sizeof(line), MPI_CHAR, lines.data(), sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world.rank != 0) return;
  fputs("# Using devices\n", stdout);
  for (int rank = 0; rank < world.nranks; ++rank) fputs(&lines[sizeof(line) * rank], stdout);
}

int run(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* slash = strrchr(argv[0], '/');
  const std::string program = slash ? slash + 1 : argv[0];
  MPI_Init(&argc, &argv);
  World world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.nranks);
  const bool prints = world.rank == 0;

  Options options;
  std::string error;
  ParseOutcome outcome = parse_options(argc, argv, &options, &error, kAllowedFlags);
  MPI_Datatype datatype = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  if (outcome == ParseOutcome::kRun) {
    for (ncclDataType_t type : options.types) {
      if (!mpi_type(type, &datatype)) {
        error = std::string("-d ") + data_type_info(type).name +
                ": MPI has no such type here (int8 uint8 int32 uint32 int64 uint64 float double)";
        outcome = ParseOutcome::kError;
      }
    }
    for (Reduction reduction : options.ops) {
      if (!mpi_op(reduction, &op)) {
        error = std::string("-o ") + reduction_name(reduction) +
                ": not an MPI operator (sum, prod, max or min)";
        outcome = ParseOutcome::kError;
      }
    }
  }
  if (outcome != ParseOutcome::kRun) {
    if (prints && outcome == ParseOutcome::kHelp) {
      fputs(usage_text(program, kAllowedFlags).c_str(), stdout);
    }
    if (prints && outcome == ParseOutcome::kError) {
      fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    }
    MPI_Finalize();
    return outcome == ParseOutcome::kHelp ? 0 : 1;
  }
  JsonReport json;
  if (prints && !options.json_path.empty() && !json.open(options.json_path, &error)) {
    fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  if (prints) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    if (char* newline = strchr(version, '\n')) *newline = '\0';
    if (json.is_open()) printf("# Writing JSON output to %s\n", options.json_path.c_str());
    printf("# MPI library: %s\n", version);
    RunDescription run;
    run.program = program;
    run.min_bytes = options.min_bytes;
    run.max_bytes = options.max_bytes;
    run.step_bytes = options.step_bytes;
    run.step_factor = options.step_factor;
    run.warmup_iters = options.warmup_iters;
    run.iters = options.iters;
    run.check = options.check;
    fputs(run_header(run).c_str(), stdout);
  }
  print_devices(world);
  world.capacity = std::max<size_t>(options.max_bytes, 64);
  world.send.assign(world.capacity, 0);
  world.recv.assign(world.capacity, 0);
  if (prints) fputs(column_header().c_str(), stdout);

  double busbw_sum = 0;
  int busbw_count = 0;
  int64_t failed_checks = 0;
  for (ncclDataType_t type_id : options.types) {
    const DataTypeInfo& type = data_type_info(type_id);
    mpi_type(type_id, &datatype);
    for (Reduction reduction : options.ops) {
      mpi_op(reduction, &op);
      const ValuePattern pattern(type, reduction, world.nranks);
      for (size_t bytes : warmup_sizes(options.min_bytes, options.max_bytes)) {
        for (int iter = 0; iter < options.warmup_iters; ++iter) {
          allreduce(world, bytes / type.bytes, type, datatype, op, false, iter);
        }
      }
      for (size_t bytes : sweep_sizes(options.min_bytes, options.max_bytes, options.step_factor,
                                      options.step_bytes)) {
        const size_t count = bytes / type.bytes;
        ResultRow row;
        row.collective = "AllReduce";
        row.size = count * type.bytes;
        row.count = count;
        row.type = type.name;
        row.redop = reduction_name(reduction);
        if (prints) fputs(row_start(row.size, count, row.type, row.redop, -1).c_str(), stdout);
        row.out_of_place =
            measure(world, options, type, datatype, op, pattern, count, false, &failed_checks);
        row.in_place =
            measure(world, options, type, datatype, op, pattern, count, true, &failed_checks);
        for (const HalfResult* half : {&row.out_of_place, &row.in_place}) {
          busbw_sum += half->busbw;
          ++busbw_count;
          if (prints) {
            fputs(row_half(half->time_us, half->algbw, half->busbw, half->checked, half->wrong)
                      .c_str(),
                  stdout);
          }
        }
        if (prints) fputs("\n", stdout);
        json.add_row(row);
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed_checks, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const double avg_busbw = busbw_count > 0 ? busbw_sum / busbw_count : 0.0;
  if (prints) {
    fputs(footer(failed_checks, avg_busbw, -1.0, program).c_str(), stdout);
    fputs("\n", stdout);
    json.finish(RunIdentity{program, options.command_line, world.nranks, world.nranks, 1, "mpirun"},
                failed_checks, avg_busbw);
  }
  MPI_Finalize();
  return failed_checks != 0 ? 7 : 0;
}

}  // namespace
}  // namespace perf
}  // namespace terse

int main(int argc, char** argv) {
  return terse::perf::run(argc, argv);
}
