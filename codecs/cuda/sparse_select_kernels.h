// Launchers of the sparsifiers' selection on the GPU (sparse_select_kernels.cu): the same rules
// as topk_select.h, so a GPU rank keeps the same elements as a CPU rank. Plain C++ so host code
// can call them; only CUDA builds define them. Both synchronise `stream` to learn how many
// elements were kept.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"
#include "codecs/topk_select.h"

namespace terse {

// Writes the kept indices of `count` elements of `dtype` at device `data`, increasing, to device
// `indices` (room for k) and sets *kept: the exact top k when plan.exact, else the sampled
// selection of `plan` (which must come from plan_sample(count, k)).
ncclResult_t launch_select_top_k(DType dtype, const void* data, size_t count, size_t k,
                                 const SamplePlan& plan, uint32_t* indices, size_t* kept,
                                 void* stream);

// Writes the indices of the elements whose magnitude_key is >= min_key, increasing, to device
// `indices` (room for count) and sets *kept.
ncclResult_t launch_select_at_least(DType dtype, const void* data, size_t count, uint32_t min_key,
                                    uint32_t* indices, size_t* kept, void* stream);

}  // namespace terse
