// The reference model of a compressed allreduce (the trust issue's exact model): what every rank
// of a call must hold, computed independently of the collectives under test (model_steps.h says
// how), keeping every rank's residuals and codec state across calls as residual memory would.
// Tests and the perf binaries' #wrong compare the code under test against it element by element;
// a compare() or compare_residuals() that finds nothing is what "correct" means.
//
//   CompressedModel model("int8", 4, MemoryKind::kResidual);
//   CallSpec spec{"sra", DType::kFloat32, count, seed, step, piece_bytes};
//   Expected expected = model.call(spec, inputs);        // inputs[r]: rank r's send buffer
//   Comparison c = compare(expected, DType::kFloat32, outputs);  // c.mismatches == 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "collectives/compressed/memory/memory_kind.h"

namespace terse {
namespace model {

// What every rank knows about one call: the same inputs the code under test runs with.
struct CallSpec {
  std::string algorithm;  // a compressed algorithm's table name: "sra", ..., "hierarchical"
  // Hierarchical: the algorithm between node leaders (terseStats::last_inner_algorithm); "": the
  // table's default for the codec and size.
  std::string inner_algorithm;
  DType dtype = DType::kFloat32;
  size_t count = 0;
  uint64_t seed = 0;  // the call's seed (the same on every rank)
  uint64_t step = 0;  // the tensor's step
  size_t piece_bytes = size_t{1} << 20;
  double result_scale = 1.0;  // 1, or 1/n for an average
  double warmup_progress = 1.0;
  MatrixShape shape;               // PowerSGD's matrix view ({0, 0}: near-square)
  std::vector<std::string> hosts;  // each rank's node (hierarchical); empty: one node
};

// What every rank's recv must hold: result[i] read back as fp32 from the output dtype, exactly
// (tolerance empty) or within tolerance[i]. A non-finite expected element must be matched by a
// non-finite one of the same kind (NaN, +Inf, -Inf).
struct Expected {
  std::vector<float> result;
  std::vector<double> tolerance;
  // How far each residual the code under test keeps may be from the model's (0: bit for bit).
  double residual_tolerance = 0;
};

struct GroupCall;    // model_steps.h
struct GroupResult;  // model_steps.h

class CompressedModel {
 public:
  // `nranks` ranks that all run `codec_spec` with residual memory of `memory`.
  CompressedModel(const std::string& codec_spec, int nranks, MemoryKind memory);
  ~CompressedModel();

  bool ok() const { return codec_ != nullptr; }
  const std::string& error() const { return error_; }
  int nranks() const { return nranks_; }

  // One call; inputs[r] is rank r's send buffer (spec.count elements of spec.dtype).
  Expected call(const CallSpec& spec, const std::vector<std::vector<uint8_t>>& inputs);

  // Rank r's residual (empty when its memory keeps none), and the owner residual a
  // scatter-reduce-allgather keeps of its chunk (empty when none was used).
  const std::vector<float>& residual(int rank) const;
  const std::vector<float>& owner_residual(int rank) const;
  // Where that chunk starts in the tensor.
  size_t owner_offset(int rank) const;

  // Forgets every residual and codec state (terseCommResetResidual).
  void reset();

 private:
  struct Rank;
  // A rail call (rail_allreduce.cpp) on `nodes` of equal size: for each local index i, the
  // nodes' exact sums of chunk i through the inner algorithm over local rank i of every node;
  // `base` carries the call's codec, seed and settings.
  GroupResult rail_call(const CallSpec& spec, const std::vector<std::vector<uint8_t>>& in,
                        const std::vector<std::vector<int>>& nodes, const GroupCall& base);

  std::unique_ptr<Codec> codec_;
  std::string error_;
  MemoryKind memory_;
  int nranks_;
  std::vector<Rank> ranks_;
  std::vector<float> warm_q_;  // PowerSGD's warm start (identical on every rank)
  size_t count_ = 0;           // of the residuals held
};

// The outcome of a comparison: elements that differ, and a description of the first few.
struct Comparison {
  size_t mismatches = 0;
  double max_error = 0;     // largest |got - expected| over finite elements
  double mean_error = 0;    // mean |got - expected| over finite elements
  double max_expected = 0;  // largest |expected|: max_error / max_expected is a relative error
  std::string first;
};

// Compares `got` (count elements of dtype, raw bytes) with the expectation.
Comparison compare(const Expected& expected, DType dtype, const uint8_t* got, size_t count);
// The same for every rank's output.
Comparison compare_all(const Expected& expected, DType dtype,
                       const std::vector<std::vector<uint8_t>>& outputs);
// Compares a residual held by the code under test with the model's.
Comparison compare_residual(const std::vector<float>& model, const std::vector<float>& got,
                            double tolerance);

}  // namespace model
}  // namespace terse
