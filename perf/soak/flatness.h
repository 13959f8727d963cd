// The soak's verdict: what a process holds (RSS, heap in use, threads, open descriptors, residual
// memory) sampled at checkpoints, and whether each stayed flat after the warm-up: its last
// checkpoint against the first checkpoint at or after the warm-up (the baseline), growth under a
// limit (5%). Pure: perf/soak.cpp samples, this decides (tests/perf/test_soak_flatness.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace terse {
namespace soak {

// What the verdict looks at, in the order of the tables.
enum Metric { kRssKb = 0, kHeapBytes, kThreads, kOpenFds, kResidualBytes, kMetricCount };

// "rss_kb", "heap_bytes", "threads", "fds", "residual_bytes".
const char* metric_name(int metric);

struct Checkpoint {
  uint64_t calls = 0;  // allreduces done by then
  double seconds = 0;  // since the first call
  double values[kMetricCount] = {};
};

// One metric over the checkpoints from the baseline on.
struct Growth {
  double baseline = 0;  // at the first checkpoint at or after the warm-up
  double last = 0;      // at the last checkpoint
  double peak = 0;      // the largest from the baseline on
  double percent = 0;   // (last - baseline) / baseline, in percent (0 when both are 0)
  double slack = 0;     // absolute growth forgiven before the percentage is taken
  bool flat = true;     // percent < the limit
};

struct Verdict {
  size_t baseline_index = 0;  // the checkpoint the growths start from
  Growth growth[kMetricCount];
  bool flat = true;  // every metric flat
  // "rss_kb grew 7.1% (41230 -> 44158)" for each metric that did not stay flat.
  std::vector<std::string> complaints;
};

// The first checkpoint whose calls reach warmup_fraction of `total_calls` (the last one when
// none does).
size_t baseline_index(const std::vector<Checkpoint>& checkpoints, uint64_t total_calls,
                      double warmup_fraction);

// Growth of every metric from checkpoints[baseline] to the last one; a metric is flat when its
// growth, less `slack[metric]` (absolute, in the metric's unit), is under `max_percent` of the
// baseline. A baseline of 0 is flat only if the last value is 0 too (or within the slack).
// Needs at least one checkpoint.
Verdict judge(const std::vector<Checkpoint>& checkpoints, size_t baseline, double max_percent,
              const double slack[kMetricCount]);

}  // namespace soak
}  // namespace terse
