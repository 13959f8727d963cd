// The compression columns of the perf table (docs/design.md section 11): when TERSE_CODEC is set
// (or -Z, which sets it), every allreduce row also shows the codec the calls ran with, the traffic
// ratio (bytes the ranks sent / what an uncompressed ring would send, from terse.h's
// statistics), and the largest and mean error relative to the largest reference value; #wrong
// counts the elements that differ from the reference model of the call (model_check.h).
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace terse {
namespace perf {

// Whether the run compresses (TERSE_CODEC set to anything but "none").
bool compression_requested();

// What a half's calls did, from the statistics before and after them.
struct CompressionFigures {
  std::string codec = "none";  // codec name of the last call ("none" when uncompressed)
  double ratio = 1.0;          // wire bytes / dense ring bytes
  double encode_us = 0;        // per call, this rank
  double decode_us = 0;
  // The last call's algorithm ("hierarchical/sra" for a hierarchical one; the dense algorithm's
  // name when uncompressed) and the time the planner predicted for it (0 when it made no plan).
  std::string algorithm;
  double predicted_us = 0;
};

// Fills the traffic figures from two snapshots around `calls` calls.
CompressionFigures compression_figures(const terseStats& before, const terseStats& after,
                                       int calls);

// The extra columns of a row: codec, ratio, rel_err, mean_err (result_table.h has their header).
std::string compression_columns(const std::string& codec, double ratio, double rel_err,
                                double mean_err);

}  // namespace perf
}  // namespace terse
