#include "perf/nccl_tests/device_report.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "perf/nccl_tests/result_table.h"
#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {
namespace {

constexpr size_t kLineBytes = 256;

}  // namespace

void report_devices(RankContext& context, int device, const std::string& gpu) {
  char line[kLineBytes] = {};
  const std::string text =
      device_line(context.rank, 0, static_cast<int>(getpid()), short_host_name(), device, gpu);
  strncpy(line, text.c_str(), kLineBytes - 1);
  std::vector<char> lines(kLineBytes * static_cast<size_t>(context.nranks));
  {
    CallTimer timer(context.slot, "the device report (ncclAllGather)");
    TERSE_PERF_NCCL(ncclAllGather(line, lines.data(), kLineBytes, ncclChar, context.comm, nullptr));
  }
  if (!context.prints) return;
  fputs("# Using devices\n", stdout);
  for (int rank = 0; rank < context.nranks; ++rank) {
    fputs(&lines[kLineBytes * static_cast<size_t>(rank)], stdout);
  }
  fflush(stdout);
}

}  // namespace perf
}  // namespace terse
