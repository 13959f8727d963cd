// What the compression engine counts of a communicator's allreduces (CompressionEngine::stats(),
// recorded in engine_statistics.cpp), as terse.h's terseCommGetStats reports it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace terse {

// One (codec, algorithm) pair's totals; terse.h's terseStatsRow.
struct CompressionStatsRow {
  std::string codec;
  std::string algorithm;
  uint64_t calls = 0;
  uint64_t raw_bytes = 0;
  uint64_t wire_bytes = 0;
  uint64_t dense_wire_bytes = 0;
  double encode_seconds = 0;
  double decode_seconds = 0;
  double seconds = 0;
};

struct CompressionStats {
  uint64_t calls = 0;
  uint64_t compressed_calls = 0;
  std::vector<CompressionStatsRow> rows;  // in order of first use
  std::string last_codec = "none";
  std::string last_algorithm;
  // What the last compressed call ran with beyond its codec and algorithm, so that a checker
  // can reproduce it exactly (model/, the perf binaries' #wrong): its seed (the same on
  // every rank), the tensor's step, and the pipeline piece size.
  uint64_t last_seed = 0;
  uint64_t last_step = 0;
  uint64_t last_piece_bytes = 0;
  // The plan's algorithm between node leaders ("" unless hierarchical) and predicted seconds.
  std::string last_inner_algorithm;
  double last_predicted_seconds = 0;
  // Calls whose tensor residual memory did not admit, run without memory (uncompressed, or
  // with the rule's fallback codec): every such call counts.
  uint64_t fallback_calls = 0;
  // Tensors residual memory did not admit, each counted once (when its WARN was written).
  uint64_t residual_refused = 0;
  // Bytes copied between device and host memory for collectives on device buffers: encoded
  // messages (and a hierarchical or rail plan's intra-node bytes) where the device backend ran an
  // allreduce, whole tensors where a call was staged (count_staging_copies).
  uint64_t pcie_bytes_to_host = 0;
  uint64_t pcie_bytes_to_device = 0;
};

}  // namespace terse
