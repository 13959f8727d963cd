// The harness of the compressed-algorithm tests: N ranks as threads of this process, each a real
// communicator with its own UCX transport on loopback (tests/collectives' CommunicatorWorld),
// each with its own codec, residual memory and scratch kept across calls, so error feedback and
// warm starts carry from one call to the next exactly as in an application.
//
// Every call also runs the reference model (model/compressed_model.h) on the same inputs,
// seed and settings, with its own residuals and codec states: check_against_model() then holds
// every rank's result, residual and owner residual to the model's (bit for bit where the model
// replays the algorithm's order). That is the check; run_and_check() makes it after each call.
// check_case() also holds results to the stated bound of compressed_error_bound.h (every element
// within S_sum ((1 + c)^k - 1) of the float64 sum): documentation of what a bound promises, and
// the error figures some tests print.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/dtype.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/compressed/compression_scratch.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "communicator_test_support.h"
#include "model/compressed_model.h"

namespace terse {
namespace test {

// Deterministic test inputs: rank `rank`'s tensor of `count` values, smooth plus noise in about
// [-1, 1], different on every rank and for every `salt`.
std::vector<float> make_rank_input(int rank, size_t count, uint64_t salt);

// The same stored as `dtype` (raw bytes).
std::vector<uint8_t> to_dtype(const std::vector<float>& values, DType dtype);
std::vector<double> from_dtype(const std::vector<uint8_t>& bytes, DType dtype, size_t count);

// How the last call compared with the reference model.
struct ModelCheck {
  size_t result_mismatches = 0;    // elements, over every rank
  size_t residual_mismatches = 0;  // residual and owner-residual elements, over every rank
  double max_relative_error = 0;   // of the results against the model
  std::string first;               // the first few differences
  std::string failure;             // a rank's error, when a call failed (then nothing compared)
  bool ok() const { return failure.empty() && result_mismatches == 0 && residual_mismatches == 0; }
};

class CompressedRanks {
 public:
  // `nranks` communicators (threads) that will all run codec `codec_spec` with memory `memory`.
  // `hosts`, when given, is each rank's node (PeerGroup::hosts; empty: one node).
  CompressedRanks(int nranks, const std::string& codec_spec, MemoryKind memory,
                  std::vector<std::string> hosts = {});
  ~CompressedRanks();

  // Switches every rank (and the model) to another codec and memory kind, with empty residual
  // memories, keeping the communicators: many codecs over one world of threads.
  void use_codec(const std::string& codec_spec, MemoryKind memory);

  // ok() is false (and error() says why) when the world or a codec could not be created.
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int nranks() const { return world_->nranks(); }
  const Codec& codec(int rank) const { return *ranks_[static_cast<size_t>(rank)].codec; }

  // One allreduce of `algorithm` on every rank: inputs[r] holds count elements of `dtype`
  // (raw bytes); outputs[r] receives them (in place when `in_place`). `step` goes to the
  // encode context (and the seed is derived from it, the same on every rank). Returns each
  // rank's result code; failures leave each rank's message in errors[r].
  std::vector<ncclResult_t> allreduce(const CompressedAlgorithmInfo& algorithm, DType dtype,
                                      size_t count, const std::vector<std::vector<uint8_t>>& inputs,
                                      std::vector<std::vector<uint8_t>>* outputs,
                                      double result_scale = 1.0, bool in_place = false,
                                      uint64_t step = 0,
                                      std::vector<std::string>* errors = nullptr);

  // CompressedContext::piece_bytes of later calls (default 1 MiB), to test pipelining.
  void set_piece_bytes(size_t bytes) { piece_bytes_ = bytes; }

  // Compares the last call's `outputs` and every rank's residuals with the model's.
  ModelCheck check_against_model(const std::vector<std::vector<uint8_t>>& outputs);
  // Forgets every rank's residuals and codec state, and the model's.
  void reset_memory();
  // The model's view of the last call.
  const model::Expected& expected() const { return expected_; }
  const model::CompressedModel& reference() const { return *model_; }

  // What rank r's calls added up to so far.
  const CompressionCounters& counters(int rank) const {
    return ranks_[static_cast<size_t>(rank)].counters;
  }
  ResidualMemory& residuals(int rank) { return *ranks_[static_cast<size_t>(rank)].residuals; }
  // Rank r's residual of the test tensor after its last call of `count` elements of `dtype`
  // (count floats), or empty when it keeps none.
  std::vector<float> residual(int rank, size_t count, DType dtype);
  CompressionScratch& scratch(int rank) { return ranks_[static_cast<size_t>(rank)].scratch; }
  // Heap allocations rank r's thread made inside the algorithm during its last call.
  uint64_t allocations(int rank) const { return ranks_[static_cast<size_t>(rank)].allocations; }
  // Rank r's scatter-reduce-allgather owner residual (its chunk of `chunk` floats), or empty.
  std::vector<float> owner_residual(int rank, size_t chunk);

 private:
  struct Rank {
    std::unique_ptr<Codec> codec;
    std::unique_ptr<ResidualMemory> residuals;
    CompressionScratch scratch;
    CompressionCounters counters;
    uint64_t allocations = 0;
  };
  std::unique_ptr<CommunicatorWorld> world_;
  std::vector<Rank> ranks_;
  std::unique_ptr<model::CompressedModel> model_;
  model::Expected expected_;
  DType last_dtype_ = DType::kFloat32;
  size_t last_count_ = 0;
  bool last_sra_ = false;
  MemoryKind memory_;
  std::vector<std::string> hosts_;
  uint32_t next_sequence_ = 1;
  size_t piece_bytes_ = size_t{1} << 20;
  bool ok_ = true;
  std::string error_;
};

struct CaseReport {
  double max_error = 0;   // largest |result - exact| over every element and rank
  double bound = 0;       // the stated bound it was held to
  size_t outside = 0;     // elements (of any rank) beyond the bound
  bool identical = true;  // every rank bitwise identical to rank 0
  ModelCheck model;       // run_and_check: against the reference model
};

// Checks `outputs` (every rank's result, in `dtype`) against the float64 sum of `inputs` scaled
// by `result_scale`, with the bound of `codec` through `lossy_steps` encodes. Records gtest
// failures (a few per case, labelled with `label`) and returns what it found.
CaseReport check_case(const std::string& label, const Codec& codec, int lossy_steps, DType dtype,
                      size_t count, const std::vector<std::vector<uint8_t>>& inputs,
                      const std::vector<std::vector<uint8_t>>& outputs, double result_scale = 1.0);

// The whole round trip most tests want: every rank's residual memory (and the model's) emptied,
// fresh inputs for every rank (salt), one allreduce, every rank succeeds, the results and
// residuals equal the reference model's, and (documentation) check_case. Returns the report
// (failures are recorded).
CaseReport run_and_check(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                         DType dtype, size_t count, uint64_t salt, double result_scale = 1.0,
                         bool in_place = false);

// `steps` calls from empty residual memories on fresh inputs (salt + step), residuals carried
// from call to call, each checked against the model: the first failure (a rank's error, or
// differences from the model, with the step in `first`), or a passing check. Records no gtest
// failure itself, so that mutation tests can assert that it fails.
ModelCheck run_model_steps(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                           DType dtype, size_t count, int steps, uint64_t salt,
                           double result_scale = 1.0);

// Conservation of error feedback over `steps` calls from empty memories: the sum of the results
// plus every rank's final residuals (and scatter-reduce-allgather owner residuals) equals the
// sum of the inputs, to fp32 rounding (gap <= tolerance per element: 2^-20 of the magnitudes
// summed over the steps: inputs, results and residuals). Records no gtest failure itself.
struct ConservationReport {
  double gap = 0;         // largest |sum results + residuals - sum inputs| over elements
  double tolerance = 0;   // at that element
  size_t violations = 0;  // elements with a gap above their tolerance
  std::string failure;    // a rank's error, when a call failed
  bool holds() const { return failure.empty() && violations == 0; }
};
ConservationReport run_conservation(CompressedRanks& ranks,
                                    const CompressedAlgorithmInfo& algorithm, size_t count,
                                    int steps, uint64_t salt);

// Every codec the re-encoding algorithms (sra, ring, recursive_doubling, tree) accept: the
// casts, the quantizers and the stateless sparsifiers.
const std::vector<std::string>& reencoding_codecs();

// One call of `algorithm` from zero residuals (the ranks' codec must be lossy and keep a
// residual): every encode's error is kept by exactly one rank, so the result equals the inputs'
// sum less the ranks' new residuals (within 1e-5, the rounding of a few fp32 additions on sums
// near 6), and every rank's residual is non-zero on more than half of the elements.
void expect_result_is_sum_less_residuals(CompressedRanks& ranks,
                                         const CompressedAlgorithmInfo& algorithm, size_t count);

// No allocation once warm: after a first call of `count` elements, three more identical calls
// grow no scratch slot on any rank.
void expect_scratch_stops_growing(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                                  size_t count);

}  // namespace test
}  // namespace terse
