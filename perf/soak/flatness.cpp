#include "perf/soak/flatness.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace terse {
namespace soak {

const char* metric_name(int metric) {
  static const char* names[kMetricCount] = {"rss_kb", "heap_bytes", "threads", "fds",
                                            "residual_bytes"};
  return metric >= 0 && metric < kMetricCount ? names[metric] : "?";
}

size_t baseline_index(const std::vector<Checkpoint>& checkpoints, uint64_t total_calls,
                      double warmup_fraction) {
  const double warmup_calls = warmup_fraction * static_cast<double>(total_calls);
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    if (static_cast<double>(checkpoints[i].calls) >= warmup_calls) return i;
  }
  return checkpoints.empty() ? 0 : checkpoints.size() - 1;
}

Verdict judge(const std::vector<Checkpoint>& checkpoints, size_t baseline, double max_percent,
              const double slack[kMetricCount]) {
  Verdict verdict;
  if (checkpoints.empty()) return verdict;
  baseline = std::min(baseline, checkpoints.size() - 1);
  verdict.baseline_index = baseline;
  for (int m = 0; m < kMetricCount; ++m) {
    Growth& g = verdict.growth[m];
    g.baseline = checkpoints[baseline].values[m];
    g.last = checkpoints.back().values[m];
    g.slack = slack != nullptr ? slack[m] : 0.0;
    g.peak = g.baseline;
    for (size_t i = baseline; i < checkpoints.size(); ++i) {
      g.peak = std::max(g.peak, checkpoints[i].values[m]);
    }
    const double grown = g.last - g.baseline;
    if (g.baseline > 0) {
      g.percent = 100.0 * grown / g.baseline;
      g.flat = 100.0 * std::max(0.0, grown - g.slack) / g.baseline < max_percent;
    } else {
      g.percent = grown > 0 ? INFINITY : 0.0;
      g.flat = grown <= g.slack;
    }
    if (!g.flat) {
      char line[160];
      std::snprintf(line, sizeof(line), "%s grew %.2f%% (%.0f -> %.0f, limit %.1f%%%s)",
                    metric_name(m), g.percent, g.baseline, g.last, max_percent,
                    g.slack > 0 ? " after the slack" : "");
      verdict.complaints.push_back(line);
      verdict.flat = false;
    }
  }
  return verdict;
}

}  // namespace soak
}  // namespace terse
