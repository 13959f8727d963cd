#include "perf/nccl_tests/row_sweep.h"
#include "perf/nccl_tests/compression_figures.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "perf/nccl_tests/measurement.h"
#include "perf/nccl_tests/result_table.h"
#include "perf/nccl_tests/size_sweep.h"

namespace terse {
namespace perf {
namespace {

RowCase make_row(const RankContext& context, const DataTypeInfo& type, Reduction op,
                 const char* redop, int root, size_t bytes) {
  const CallCounts counts = context.test.counts(bytes / type.bytes, type.bytes, context.nranks);
  const bool compressed = compression_requested() && std::string(context.test.name) == "AllReduce";
  return RowCase{type, op, redop, root, counts, ValuePattern(type, op, context.nranks, compressed)};
}

// One datatype, operator and root: warm-up, then a row per size.
void run_case(RankContext& context, const DataTypeInfo& type, Reduction op, const char* redop,
              int root, size_t min_bytes, size_t max_bytes, SweepTotals* totals) {
  const Options& options = context.options;
  context.sync.barrier();
  for (size_t bytes : warmup_sizes(min_bytes, max_bytes)) {
    const RowCase row = make_row(context, type, op, redop, root, bytes);
    for (int iter = 0; iter < options.warmup_iters; ++iter) launch_call(context, row, false, iter);
  }
  for (size_t bytes : sweep_sizes(min_bytes, max_bytes, options.step_factor, options.step_bytes)) {
    const RowCase row = make_row(context, type, op, redop, root, bytes);
    ResultRow result;
    result.collective = context.test.name;
    result.size = std::max(row.counts.send, row.counts.recv) * type.bytes;
    result.count = row.counts.param;
    result.type = type.name;
    result.redop = redop;
    result.root = root;
    if (context.prints) {
      fputs(row_start(result.size, result.count, result.type, redop, root).c_str(), stdout);
      fflush(stdout);
    }
    // Each half is printed as soon as it is measured, so a slow or stuck call shows where.
    auto record = [&](const HalfResult& half) {
      totals->busbw_sum += half.busbw;
      ++totals->busbw_count;
      if (!context.prints) return;
      fputs(row_half(half.time_us, half.algbw, half.busbw, half.checked, half.wrong).c_str(),
            stdout);
      fflush(stdout);
    };
    result.out_of_place = measure_half(context, row, false, &totals->failed_checks);
    record(result.out_of_place);
    result.in_place = measure_half(context, row, true, &totals->failed_checks);
    record(result.in_place);
    if (context.prints && compression_requested()) {
      // The out-of-place half's figures (the in-place half's are in the JSON).
      const HalfResult& half = result.out_of_place;
      fputs(compression_columns(half.compressed ? half.codec : "none", half.ratio, half.rel_err,
                                half.mean_err)
                .c_str(),
            stdout);
    }
    if (context.prints) fputs("\n", stdout);
    if (context.json != nullptr) context.json->add_row(result);
  }
}

}  // namespace

SweepTotals run_rows(RankContext& context, size_t min_bytes, size_t max_bytes) {
  const Options& options = context.options;
  SweepTotals totals;
  std::vector<int> roots = {-1};
  if (context.test.uses_root) {
    roots.clear();
    if (options.root == -1) {
      for (int root = 0; root < context.nranks; ++root) roots.push_back(root);
    } else {
      roots.push_back(options.root);
    }
  }
  for (ncclDataType_t type : options.types) {
    const DataTypeInfo& info = data_type_info(type);
    if (context.test.op_use == OpUse::kNone) {
      for (int root : roots)
        run_case(context, info, Reduction::kNone, "none", root, min_bytes, max_bytes, &totals);
      continue;
    }
    for (Reduction op : options.ops) {
      const Reduction reduces = context.test.op_use == OpUse::kReduces ? op : Reduction::kNone;
      for (int root : roots) {
        run_case(context, info, reduces, reduction_name(op), root, min_bytes, max_bytes, &totals);
      }
    }
  }
  return totals;
}

}  // namespace perf
}  // namespace terse
