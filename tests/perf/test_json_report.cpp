// -J: the document holds the run and every row, with null where the table prints N/A.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "perf/nccl_tests/json_report.h"

namespace terse {
namespace perf {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

TEST(PerfJsonReport, EveryRowWithBothHalves) {
  const std::string path = testing::TempDir() + "perf_report.json";
  JsonReport report;
  std::string error;
  ASSERT_TRUE(report.open(path, &error)) << error;
  for (size_t size : {8, 64}) {
    ResultRow row;
    row.collective = "SendRecv";
    row.size = size;
    row.count = size / 4;
    row.type = "float";
    row.redop = "sum";
    row.out_of_place = {12.5, 0.5, 0.5, true, 0};
    row.in_place = {11.0, 0.6, 0.6, false, 0};
    report.add_row(row);
  }
  report.finish(
      {"sendrecv_perf", {"sendrecv_perf", "-b", "8", "-J", "x \"q\""}, 4, 2, 2, "torchrun"}, 0,
      0.55);
  const std::string text = read_file(path);
  EXPECT_EQ(occurrences(text, "\"collective\": \"SendRecv\""), 2u);
  EXPECT_EQ(occurrences(text, "\"nranks\": 4"), 3u);  // the run and each row
  EXPECT_NE(text.find("\"size\": 64, \"count\": 16, \"type\": \"float\", \"redop\": \"sum\", "
                      "\"root\": -1"),
            std::string::npos);
  EXPECT_NE(text.find("\"out_of_place\": {\"time_us\": 12.5, \"algbw\": 0.5, \"busbw\": 0.5, "
                      "\"wrong\": 0}"),
            std::string::npos);
  EXPECT_NE(text.find("\"wrong\": null"), std::string::npos);
  EXPECT_NE(text.find("\"command_line\": [\"sendrecv_perf\", \"-b\", \"8\", \"-J\", "
                      "\"x \\\"q\\\"\"]"),
            std::string::npos);
  EXPECT_NE(text.find("\"launcher\": \"torchrun\""), std::string::npos);
  EXPECT_NE(text.find("\"out_of_bounds\": 0, \"avg_busbw\": 0.55}"), std::string::npos);
  std::remove(path.c_str());
}

TEST(PerfJsonReport, AnUnwritablePathIsRefusedAtOnce) {
  JsonReport report;
  std::string error;
  EXPECT_FALSE(report.open("/nonexistent-directory/x.json", &error));
  EXPECT_NE(error.find("-J /nonexistent-directory/x.json: cannot write"), std::string::npos)
      << error;
}

TEST(PerfJsonReport, StringsAreEscaped) {
  EXPECT_EQ(json_string("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

}  // namespace
}  // namespace perf
}  // namespace terse
