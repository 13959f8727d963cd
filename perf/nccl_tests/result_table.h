// nccl-tests' text output, byte for byte: the run header, the two-line column header, one row
// per size (out-of-place then in-place), and the footer with the out-of-bounds count and the
// average bus bandwidth. Functions return the text so that tests can compare it; the caller
// prints it (rank 0 only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace terse {
namespace perf {

// The nccl-tests release whose output format this reproduces.
constexpr const char* kNcclTestsFormatVersion = "2.19.6";

struct RunDescription {
  std::string program;   // e.g. "all_reduce_perf"
  int nccl_version = 0;  // ncclGetVersion of the library linked
  int threads = 1;
  int gpus = 1;
  size_t min_bytes = 0, max_bytes = 0, step_bytes = 0, step_factor = 1;
  int warmup_iters = 0, iters = 0, agg_iters = 1, check = 1, blocking = 0;
};

// "# nccl-tests version ...", "# Collective test starting: ...", "# nThread ...", the blocking
// line when -z 1, and "#".
std::string run_header(const RunDescription& run);

// One "# Using devices" entry: `gpu` ("[bus id] name") where nccl-tests names the GPU, or
// "[host] host memory" when it is empty.
std::string device_line(int rank, int group, int pid, const std::string& host, int device,
                        const std::string& gpu = "");

// "#" and the three column-header lines; with `compression`, the codec, ratio, rel_err and mean_err
// columns after the in-place half (compression_figures.h).
std::string column_header(bool compression = false);

// `value` in at most `width` characters, as nccl-tests prints times and bandwidths: two
// decimals if they fit, then one, then none, then an exponent.
std::string format_number(double value, int width);

// The first columns of a row: size (B), count (elements), type, redop, root.
std::string row_start(size_t bytes, size_t count, const std::string& type, const std::string& op,
                      int root);

// One half of a row: time (us), algbw, busbw (GB/s), #wrong (or N/A when not checked).
std::string row_half(double time_us, double algbw, double busbw, bool checked, int64_t wrong);

// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X" (with OK/FAILED when a
// minimum is given, NCCL_TESTS_MIN_BW), "#", "# Collective test concluded: ...", "#".
std::string footer(int64_t out_of_bounds, double avg_busbw, double min_busbw,
                   const std::string& program);

}  // namespace perf
}  // namespace terse
