#include "perf/nccl_tests/measurement.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/compression_figures.h"
#include "perf/nccl_tests/element_values.h"
#include "perf/nccl_tests/model_check.h"
#include "perf/nccl_tests/row_check.h"
#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {
namespace {

ncclRedOp_t builtin_op(Reduction op) {
  switch (op) {
    case Reduction::kProd:
      return ncclProd;
    case Reduction::kMax:
      return ncclMax;
    case Reduction::kMin:
      return ncclMin;
    case Reduction::kAvg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

}  // namespace

bool compresses(const RankContext& context, const RowCase& row) {
  return compression_requested() && std::string(context.test.name) == "AllReduce" &&
         (row.op == Reduction::kSum || row.op == Reduction::kAvg) && row.type.is_float &&
         (row.type.type == ncclFloat32 || row.type.type == ncclFloat16 ||
          row.type.type == ncclBfloat16);
}

void launch_call(RankContext& context, const RowCase& row, bool in_place, int iteration) {
  const size_t element = row.type.bytes;
  const size_t span = std::max(row.counts.send, row.counts.recv) * element;
  const size_t positions = span == 0 ? 1 : std::max<size_t>(context.buffers.capacity() / span, 1);
  const size_t shift = span * (static_cast<size_t>(iteration) % positions);
  char* recv_base = context.buffers.recv() + shift;
  const size_t rank = static_cast<size_t>(context.rank);
  const char* send = in_place ? recv_base + rank * row.counts.send_in_place * element
                              : context.buffers.send() + shift;
  char* recv = recv_base + (in_place ? rank * row.counts.recv_in_place * element : 0);

  ncclRedOp_t op = builtin_op(row.op);
  const bool premul = row.op == Reduction::kMulSum;
  if (premul) {
    // The scalar in the row's datatype; HostImmediate reads it here.
    uint64_t scalar = 0;
    store_element(row.type.type, &scalar, 0, row.pattern.premul_scalar(context.rank));
    TERSE_PERF_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, row.type.type, ncclScalarHostImmediate,
                                             context.comm));
  }
  {
    CallTimer timer(context.slot, context.test.name);
    TERSE_PERF_NCCL(context.test.launch(send, recv, row.counts.param, row.type.type, op, row.root,
                                        context.comm, static_cast<cudaStream_t>(context.stream)));
  }
  if (premul) TERSE_PERF_NCCL(ncclRedOpDestroy(op, context.comm));
}

HalfResult measure_half(RankContext& context, const RowCase& row, bool in_place,
                        int64_t* failed_checks) {
  const Options& options = context.options;
  const bool checked = options.check > 0 && (!in_place || context.test.checks_in_place);
  if (checked) prepare_row_inputs(context, row, in_place);
  launch_call(context, row, in_place, 0);
  // With device buffers the call may return before its stream ran: the timing starts once it has.
  context.buffers.synchronize();
  context.sync.barrier();

  // Compressed allreduces: the statistics around the timed calls give the traffic figures.
  const bool compression = compresses(context, row);
  terseStats before{};
  if (compression) TERSE_PERF_NCCL(terseCommGetStats(context.comm, &before));
  const auto start = std::chrono::steady_clock::now();
  for (int iter = 0; iter < options.iters; ++iter) {
    if (options.agg_iters > 1) TERSE_PERF_NCCL(ncclGroupStart());
    for (int call = 0; call < options.agg_iters; ++call) {
      launch_call(context, row, in_place, iter * options.agg_iters + call);
      // Inside a group the barrier would only be queued: it follows the group instead.
      if (options.blocking == 1 && options.agg_iters == 1) {
        context.buffers.synchronize();  // -z 1 waits for the call, as nccl-tests does
        context.sync.barrier();
      }
    }
    if (options.agg_iters > 1) {
      {
        CallTimer timer(context.slot, context.test.name);
        TERSE_PERF_NCCL(ncclGroupEnd());
      }
      if (options.blocking == 1) {
        context.buffers.synchronize();
        context.sync.barrier();
      }
    }
  }
  // The batch ends when the last call's stream has run it, as nccl-tests' cudaStreamSynchronize
  // after its timed loop: device-buffer calls return once queued.
  context.buffers.synchronize();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CompressionFigures figures;
  if (compression) {
    terseStats after{};
    TERSE_PERF_NCCL(terseCommGetStats(context.comm, &after));
    figures = compression_figures(before, after, options.iters * options.agg_iters);
  }
  const double seconds = context.sync.combine_time(
      elapsed.count() / (static_cast<double>(options.iters) * options.agg_iters), options.average);

  const size_t bytes = std::max(row.counts.send, row.counts.recv) * row.type.bytes;
  const Bandwidth bw = bandwidth(bytes, seconds, context.test.bus_factor(context.nranks));
  HalfResult result;
  result.time_us = seconds * 1.0e6;
  result.algbw = bw.algbw;
  result.busbw = bw.busbw;
  result.checked = checked;
  if (compression) {
    result.compressed = true;
    result.codec = figures.codec;
    result.ratio = -context.sync.min(-figures.ratio);  // the largest of any rank
    result.encode_us = figures.encode_us;
    result.decode_us = figures.decode_us;
    result.algorithm = figures.algorithm;
    result.predicted_us = figures.predicted_us;
  }
  if (!checked) return result;
  for (int pass = 0; pass < options.check; ++pass) {
    prepare_row_inputs(context, row, in_place, /*nan_output=*/compression);
    // The checked call starts from empty residual memory, as the model of it does: the residual
    // the timed calls left behind would otherwise be part of the result (error feedback at work).
    if (compression) TERSE_PERF_NCCL(terseCommResetResidual(context.comm, nullptr));
    launch_call(context, row, in_place, 0);
    // The statistics below describe the last call run: with device buffers, once it has run.
    context.buffers.synchronize();
    int64_t wrong = 0;
    terseStats stats{};
    if (compression) TERSE_PERF_NCCL(terseCommGetStats(context.comm, &stats));
    // A call the policy or `auto` left uncompressed (every rank alike) is checked exactly.
    if (compression && std::strcmp(stats.last_codec, "none") != 0) {
      // Every rank sees the same algorithm, so every rank joins the gather or none does.
      std::vector<std::string> hosts;
      if (std::strcmp(stats.last_algorithm, "hierarchical") == 0 ||
          std::strcmp(stats.last_algorithm, "rail") == 0) {
        hosts = gather_hosts(context);
      }
      const ModelFigures figures = check_compressed_row(context, row, in_place, hosts);
      wrong = figures.wrong;
      result.rel_err = -context.sync.min(-figures.max_rel_err);  // the largest of any rank
      result.mean_err = -context.sync.min(-figures.mean_rel_err);
    } else {
      wrong = count_row_wrong(context, row, in_place);
    }
    if (wrong != 0) ++*failed_checks;
    result.wrong = context.sync.sum(wrong);
    if (result.wrong != 0) break;
  }
  return result;
}

}  // namespace perf
}  // namespace terse
