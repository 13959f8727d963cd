// Launchers of the sparse decoder's device steps (sparse_decode_kernels.cu); sparse_message.cpp
// calls them for messages in device memory. Only CUDA builds define them.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// Checks every index of a device message: below count and above its predecessor, or with
// `strata` inside stratum j. Sets *first_bad to the first failing position, or to `kept` when
// all pass (synchronises `stream`).
ncclResult_t launch_sparse_validate(const uint32_t* indices, size_t kept, size_t count, bool strata,
                                    void* stream, size_t* first_bad);

// Zeroes the output unless accumulating, then writes (or adds) value j * scale at index j
// (indices null: drawn from the strata with `seed`; scale: the stratum length when `scaled`).
ncclResult_t launch_sparse_scatter(DType value_type, const void* values, const uint32_t* indices,
                                   uint64_t seed, size_t kept, bool scaled, DType output_type,
                                   void* output, size_t count, bool accumulate, void* stream);

}  // namespace terse
