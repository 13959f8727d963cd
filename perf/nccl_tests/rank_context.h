// What one rank thread works with, and one row's case (datatype, operator, root, layout).
#pragma once

#include <nccl.h>

#include "perf/nccl_tests/collective.h"
#include "perf/nccl_tests/json_report.h"
#include "perf/nccl_tests/options.h"
#include "perf/nccl_tests/rank_buffers.h"
#include "perf/nccl_tests/rank_sync.h"
#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {

struct RankContext {
  const Options& options;
  const CollectiveTest& test;
  ncclComm_t comm;
  int rank;  // in the communicator
  int nranks;
  int slot;  // this rank's thread in the process
  RankBuffers buffers;
  RankSync sync;
  bool prints;       // rank 0 prints the table
  JsonReport* json;  // rank 0 with -J, else null
  void* stream;      // every call's stream: the rank's CUDA stream with device buffers, else null
};

struct RowCase {
  const DataTypeInfo& type;
  Reduction op;       // what the call reduces with (kNone for data movement)
  const char* redop;  // the redop column
  int root;           // -1 without one
  CallCounts counts;
  ValuePattern pattern;
};

}  // namespace perf
}  // namespace terse
