#include "perf/nccl_tests/result_table.h"

#include <nccl.h>

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace terse {
namespace perf {
namespace {

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));

std::string format(const char* pattern, ...) {
  va_list arguments;
  va_start(arguments, pattern);
  va_list copy;
  va_copy(copy, arguments);
  const int length = vsnprintf(nullptr, 0, pattern, copy);
  va_end(copy);
  std::vector<char> text(static_cast<size_t>(length) + 1);
  vsnprintf(text.data(), text.size(), pattern, arguments);
  va_end(arguments);
  return std::string(text.data(), static_cast<size_t>(length));
}

// The five leading columns of the header lines, each given its text.
std::string leading_columns(const char* size, const char* count, const char* type,
                            const char* redop, const char* root) {
  return format("# %10s  %12s  %8s  %6s  %6s", size, count, type, redop, root);
}

}  // namespace

std::string run_header(const RunDescription& run) {
  std::string text = format("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n",
                            kNcclTestsFormatVersion, NCCL_VERSION_CODE, run.nccl_version);
  text += format("# Collective test starting: %s\n", run.program.c_str());
  const bool by_factor = run.step_factor > 1;
  text += format(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d unalign: %d\n",
      run.threads, run.gpus, run.min_bytes, run.max_bytes,
      by_factor ? run.step_factor : run.step_bytes, by_factor ? "factor" : "bytes",
      run.warmup_iters, run.iters, run.agg_iters, run.check, 0, 0);
  if (run.blocking == 1) {
    text += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
  }
  text += "#\n";
  return text;
}

std::string device_line(int rank, int group, int pid, const std::string& host, int device,
                        const std::string& gpu) {
  return format("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", rank, group, pid,
                host.c_str(), device, gpu.empty() ? "[host] host memory" : gpu.c_str());
}

std::string column_header(bool compression) {
  // The extra cells replace the lines' closing space, so rows and headers stay aligned.
  const auto extra = [&](const char* codec, const char* ratio, const char* rel_err,
                         const char* mean_err) {
    return compression ? format("  %9s  %6s  %8s  %8s\n", codec, ratio, rel_err, mean_err)
                       : std::string(" \n");
  };
  std::string text = "#\n";
  text += leading_columns("", "", "", "", "") +
          "           out-of-place                       in-place          \n";
  text += leading_columns("size", "count", "type", "redop", "root") +
          format("  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong",
                 "time", "algbw", "busbw", "#wrong") +
          extra("codec", "ratio", "rel_err", "mean_err");
  text += leading_columns("(B)", "(elements)", "", "", "") +
          format("  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                 "(GB/s)", "(GB/s)", "") +
          extra("", "", "", "");
  return text;
}

std::string format_number(double value, int width) {
  for (int decimals = 2; decimals >= 0; --decimals) {
    std::string text = format("%*.*f", width, decimals, value);
    if (static_cast<int>(text.size()) <= width) return text;
  }
  return format(width >= 7 ? "%*.1e" : "%*.0e", width, value).substr(0, width);
}

std::string row_start(size_t bytes, size_t count, const std::string& type, const std::string& op,
                      int root) {
  return format("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type.c_str(), op.c_str(), root);
}

std::string row_half(double time_us, double algbw, double busbw, bool checked, int64_t wrong) {
  const std::string head = format("  %7s  %6s  %6s", format_number(time_us, 7).c_str(),
                                  format_number(algbw, 6).c_str(), format_number(busbw, 6).c_str());
  return head + (checked ? format("  %6g", static_cast<double>(wrong)) : "    N/A");
}

std::string footer(int64_t out_of_bounds, double avg_busbw, double min_busbw,
                   const std::string& program) {
  std::string text =
      format("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(out_of_bounds),
             out_of_bounds != 0 ? "FAILED" : "OK");
  const char* verdict = min_busbw < 0 ? "" : (avg_busbw < 0.9 * min_busbw ? "FAILED" : "OK");
  text += format("# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw, verdict);
  text += "#\n";
  text += format("# Collective test concluded: %s\n", program.c_str());
  text += "#\n";
  return text;
}

}  // namespace perf
}  // namespace terse
