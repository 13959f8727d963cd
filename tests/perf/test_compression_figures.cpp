// The compression columns' arithmetic (perf/nccl_tests/compression_figures.h): the traffic figures
// from two statistics snapshots and the columns' layout. Each test derives its expected figure by
// hand. (#wrong of a compressed row is the reference model's check, model_check.h, run for real
// by the perf_all_reduce_* tests and proved to fail by perf_compressed_wrong_detected_*.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "perf/nccl_tests/compression_figures.h"

namespace terse {
namespace perf {
namespace {

TEST(PerfCompressionFigures, RatioAndTimesPerCallFromTwoSnapshots) {
  terseStats before{}, after{};
  before.wire_bytes = 1000;
  before.dense_wire_bytes = 4000;
  before.encode_seconds = 1.0;
  before.decode_seconds = 2.0;
  after.wire_bytes = 1000 + 3 * 260;
  after.dense_wire_bytes = 4000 + 3 * 1000;
  after.encode_seconds = 1.0 + 3 * 0.002;
  after.decode_seconds = 2.0 + 3 * 0.001;
  std::strcpy(after.last_codec, "topk:ratio=0.01,memory=host");
  const CompressionFigures figures = compression_figures(before, after, 3);
  EXPECT_EQ(figures.codec, "topk");  // the name, without the spelled-out parameters
  EXPECT_DOUBLE_EQ(figures.ratio, 0.26);
  EXPECT_NEAR(figures.encode_us, 2000, 1e-6);
  EXPECT_NEAR(figures.decode_us, 1000, 1e-6);
  // No traffic at all (a single rank): ratio 1, not a division by zero.
  EXPECT_DOUBLE_EQ(compression_figures(after, after, 3).ratio, 1.0);
}

TEST(PerfCompressionFigures, ColumnsLineUpWithTheHeader) {
  EXPECT_EQ(compression_columns("int8", 0.2583, 3.89e-3, 1.2e-4),
            "       int8  0.2583  3.89e-03  1.20e-04");
}

}  // namespace
}  // namespace perf
}  // namespace terse
