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

// Every allreduce, and the totals of each (codec, algorithm) pair.
struct TrafficStats {
  uint64_t calls = 0;
  uint64_t compressed_calls = 0;
  std::vector<CompressionStatsRow> rows;  // in order of first use
};

// The last call: its codec and algorithm, and what the last compressed call ran with beyond them,
// so that a checker can reproduce it exactly (model/, the perf binaries' #wrong): its seed (the
// same on every rank), the tensor's step, the pipeline piece size, and the plan's algorithm
// between node leaders ("" unless hierarchical) and predicted seconds.
struct LastCallStats {
  std::string codec = "none";
  std::string algorithm;
  uint64_t seed = 0;
  uint64_t step = 0;
  uint64_t piece_bytes = 0;
  std::string inner_algorithm;
  double predicted_seconds = 0;
};

// What residual memory did not admit: calls run without memory (uncompressed, or with the rule's
// fallback codec), every such call counted; and tensors, each counted once (when its WARN was
// written).
struct AdmissionStats {
  uint64_t fallback_calls = 0;
  uint64_t refused_tensors = 0;
};

// Bytes copied between device and host memory for collectives on device buffers: encoded
// messages (and a hierarchical or rail plan's intra-node bytes) where the device backend ran an
// allreduce, whole tensors where a call was staged (count_staging_copies).
struct DeviceCopyStats {
  uint64_t to_host = 0;
  uint64_t to_device = 0;
};

// The planner's current estimates (planner.h, Learning): each link class's and each measured
// codec's figures as the ranks agreed them, beside the nominal ones they started from.
struct LinkEstimate {
  double latency_s = 0;
  double bytes_per_s = 0;
  double nominal_latency_s = 0;
  double nominal_bytes_per_s = 0;
};
struct CodecEstimate {
  std::string codec;  // canonical spec
  // Per byte of fp32 input on one rank as the calls ran (the core share included).
  double encode_bytes_per_s = 0;
  double decode_bytes_per_s = 0;
  double probed_encode_bytes_per_s = 0;  // the probe times the core share: the prior
  double probed_decode_bytes_per_s = 0;
  uint64_t observations = 0;  // encodes measured into the estimate, over every rank
};
struct PlannerEstimates {
  bool learning = false;
  LinkEstimate intra, inter;
  // The additions (an fp32 sum of two buffers) on one rank, bytes per second, as the calls ran
  // and as probed times the core share.
  double reduce_bytes_per_s = 0;
  double nominal_reduce_bytes_per_s = 0;
  std::vector<CodecEstimate> codecs;  // every codec whose speed the ranks agreed on
  uint64_t agreements = 0;
  uint64_t plan_changes = 0;  // re-plans that changed a tensor's choice
  uint64_t explorations = 0;  // calls that ran a contender instead of the best
};

// The engine's statistics, by concern.
struct CompressionStats {
  TrafficStats traffic;
  LastCallStats last_call;
  AdmissionStats admission;
  DeviceCopyStats device_copies;
  PlannerEstimates planner;  // read from the planner when asked, never reset
};

}  // namespace terse
