// The text output, byte for byte as nccl-tests prints it.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "perf/nccl_tests/result_table.h"

namespace terse {
namespace perf {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

TEST(PerfResultTable, NumbersFitTheirColumns) {
  EXPECT_EQ(format_number(1.5, 7), "   1.50");
  EXPECT_EQ(format_number(12100.44, 7), "12100.4");
  EXPECT_EQ(format_number(123456.7, 7), " 123457");
  EXPECT_EQ(format_number(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(format_number(0.004, 6), "  0.00");
  EXPECT_EQ(format_number(999.99, 6), "999.99");
  EXPECT_EQ(format_number(1234.5, 6), "1234.5");
  EXPECT_EQ(format_number(1234567.0, 6), " 1e+06");
}

TEST(PerfResultTable, RowsHaveNcclTestsColumns) {
  const std::string row = row_start(67108864, 16777216, "float", "sum", -1) +
                          row_half(40841.1, 1.6432, 1.6432, true, 0) +
                          row_half(34082.8, 1.969, 1.969, true, 3);
  EXPECT_EQ(row,
            "    67108864      16777216     float     sum      -1  40841.1    1.64    1.64       "
            "0  34082.8    1.97    1.97       3");
  EXPECT_EQ(row_half(4.15, 0.001, 0.001, false, 0), "     4.15    0.00    0.00    N/A");
}

TEST(PerfResultTable, HeaderLines) {
  const std::vector<std::string> lines = lines_of(column_header());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "#");
  EXPECT_EQ(lines[2],
            "#       size         count      type   redop    root     time   algbw   busbw  "
            "#wrong     time   algbw   busbw  #wrong ");
  EXPECT_EQ(lines[3],
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)     "
            "        (us)  (GB/s)  (GB/s)         ");
  // The out-of-place and in-place labels sit over their halves.
  EXPECT_EQ(lines[1].find("out-of-place"), 63u);
  EXPECT_EQ(lines[1].find("in-place"), 98u);
}

TEST(PerfResultTable, RunHeaderNamesTheSweep) {
  RunDescription run;
  run.program = "all_reduce_perf";
  run.nccl_version = 22809;
  run.threads = 2;
  run.min_bytes = 8;
  run.max_bytes = 67108864;
  run.step_factor = 2;
  run.warmup_iters = 1;
  run.iters = 20;
  run.check = 1;
  run.blocking = 1;
  const std::vector<std::string> lines = lines_of(run_header(run));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[1], "# Collective test starting: all_reduce_perf");
  EXPECT_EQ(lines[2],
            "# nThread 2 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup iters: 1 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0");
  EXPECT_EQ(lines[3].rfind("# Blocking Enabled", 0), 0u);
  EXPECT_EQ(lines[4], "#");
  EXPECT_EQ(device_line(3, 0, 4242, "node7", 1),
            "#  Rank  3 Group  0 Pid   4242 on      node7 device  1 [host] host memory\n");
  EXPECT_EQ(device_line(0, 0, 17, "node7", 2, "[0000:65:00.0] NVIDIA H100"),
            "#  Rank  0 Group  0 Pid     17 on      node7 device  2 [0000:65:00.0] NVIDIA H100\n");
}

TEST(PerfResultTable, Footer) {
  EXPECT_EQ(footer(0, 1.25, -1, "all_reduce_perf"),
            "# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 1.25 \n"
            "#\n"
            "# Collective test concluded: all_reduce_perf\n"
            "#\n");
  const std::string failed = footer(2, 1.0, 2.0, "x");
  EXPECT_NE(failed.find("# Out of bounds values : 2 FAILED\n"), std::string::npos);
  EXPECT_NE(failed.find("# Avg bus bandwidth    : 1 FAILED\n"), std::string::npos);
}

}  // namespace
}  // namespace perf
}  // namespace terse
