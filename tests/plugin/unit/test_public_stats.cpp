// terseCommGetStats' struct from the engine's statistics (plugin/public_stats.h), fed statistics
// written here: more (codec, algorithm) rows than terseStats holds.
#include <gtest/gtest.h>

#include <string>

#include "plugin/public_stats.h"

namespace terse {
namespace {

TEST(PublicStats, RowsBeyondTheTableAreCountedAndInTheTotals) {
  constexpr int kRows = TERSE_STATS_MAX_ROWS + 7;
  CompressionStats now;
  now.traffic.calls = 1000;
  now.traffic.compressed_calls = 900;
  uint64_t raw = 0, wire = 0;
  for (int i = 0; i < kRows; ++i) {
    CompressionStatsRow row;
    row.codec = "codec" + std::to_string(i);
    row.algorithm = i % 2 ? "sra" : "tree";
    row.calls = 1 + i;
    row.raw_bytes = 1000 + i;
    row.wire_bytes = 10 + i;
    raw += row.raw_bytes;
    wire += row.wire_bytes;
    now.traffic.rows.push_back(row);
  }
  now.last_call.codec = std::string(300, 'x');  // longer than last_codec holds
  ResidualStats residuals;
  residuals.entries = 3;
  residuals.misses = 5;

  const terseStats out = public_stats(now, residuals);
  EXPECT_EQ(out.size, sizeof(terseStats));
  EXPECT_EQ(out.nrows, TERSE_STATS_MAX_ROWS);
  EXPECT_EQ(out.rows_beyond, 7u);
  EXPECT_EQ(out.raw_bytes, raw);
  EXPECT_EQ(out.wire_bytes, wire);
  EXPECT_STREQ(out.rows[0].codec, "codec0");
  EXPECT_STREQ(out.rows[TERSE_STATS_MAX_ROWS - 1].codec, "codec31");
  EXPECT_STREQ(out.rows[TERSE_STATS_MAX_ROWS - 1].algorithm, "sra");
  EXPECT_EQ(out.rows[TERSE_STATS_MAX_ROWS - 1].calls, 32u);
  EXPECT_EQ(std::string(out.last_codec), std::string(sizeof(out.last_codec) - 1, 'x'));
  EXPECT_EQ(out.residual_entries, 3u);
  EXPECT_EQ(out.residual_admitted, 5u);

  // Exactly as many rows as fit: none beyond.
  now.traffic.rows.resize(TERSE_STATS_MAX_ROWS);
  EXPECT_EQ(public_stats(now, residuals).rows_beyond, 0u);
  EXPECT_EQ(public_stats(now, residuals).nrows, TERSE_STATS_MAX_ROWS);
}

}  // namespace
}  // namespace terse
