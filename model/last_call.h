// The reference model of a call libterse ran, from what terse.h reports after it
// (terseCommGetStats: the codec spec, algorithm, seed, tensor step and piece size of the last
// compressed call): how the perf binaries' #wrong and the process tests recompute a call they only
// see from outside.
#pragma once

#include <terse/terse.h>

#include <cstddef>
#include <memory>

#include "model/compressed_model.h"

namespace terse {
namespace model {

// A model of `nranks` ranks for the codec the last call ran, with the memory kind the policy
// gives that codec by default (default_memory_kind); null when no model can make the codec.
std::unique_ptr<CompressedModel> model_of_last_call(const terseStats& stats, int nranks);

// The call spec of the last call, for `count` elements of `dtype` scaled by `result_scale`
// (1, or 1/n for an average); shape and hosts are the caller's to add.
CallSpec spec_of_last_call(const terseStats& stats, DType dtype, size_t count, double result_scale);

}  // namespace model
}  // namespace terse
