// Test-only mutations of the compressed allreduce: deliberate mistakes that the suite's checks
// (the reference model of model/, conservation of error feedback) must catch, so that a
// check that cannot fail is noticed (tests/compressed/test_mutations.cpp). A process has one
// mutation, kNone unless a test sets one. This file's run_compressed_algorithm replaces the
// library's plain one (collectives/compressed/run_compressed_algorithm.h) in the test binary
// that links it, so every compressed call of the engine and of the harness goes through the
// mutation; the shipped library holds none of it.
#pragma once

#include <nccl.h>

#include "collectives/compressed/run_compressed_algorithm.h"

namespace terse {

enum class CompressedMutation : int {
  kNone = 0,
  kZeroResult,          // every rank's result is zeros
  kDropContribution,    // group position 1 sends zeros instead of its input
  kDoubleContribution,  // group position 1 sends twice its input
  kSkipResidualUpdate,  // the residual keeps its value: no encode error is ever kept
  kStaleResidual,       // the contribution is compensated with the residual of a call earlier
};

void set_compressed_mutation(CompressedMutation mutation);
CompressedMutation compressed_mutation();
// "zero_result", "drop_contribution", ... (test names).
const char* compressed_mutation_name(CompressedMutation mutation);

}  // namespace terse
