// The two ends of a reduction that a ReduceOp may ask for besides combining (reduction.h): how a
// rank's own input enters (scaled for PreMulSum and float average) and how the combined result
// is finished (divided for integer average). Every reducing algorithm calls both, each on the
// elements it is responsible for, so that the semantics live in one place.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "collectives/reduction.h"

namespace terse {

// output[i] = input[i] * op.input_scale when op.scale_input, else a copy (nothing to do when
// output == input). `output` and `input` are either equal or disjoint.
void prepare_contribution(ncclDataType_t type, const ReduceOp& op, void* output, const void* input,
                          size_t count);

// Whether prepare_contribution changes anything when output == input.
inline bool contribution_needs_scaling(const ReduceOp& op) {
  return op.scale_input;
}

// data[i] /= op.result_divisor when op.divide_result; otherwise nothing.
void finish_result(ncclDataType_t type, const ReduceOp& op, void* data, size_t count);

}  // namespace terse
