// Launchers of the encoder steps that the sparsifiers share once the kept indices are known
// (sparse_encode_kernels.cu; the host versions are in sparse_encode.h). Device pointers,
// ordered on `stream`; only CUDA builds define them.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// indices[j] = stratum_pick(seed, j, count, kept) (Random-K's explicit indices).
ncclResult_t launch_stratum_indices(uint64_t seed, size_t count, size_t kept, uint32_t* indices,
                                    void* stream);

// As gather_sparse_values: values[j] = data[index j], bit for bit in the storage type.
ncclResult_t launch_gather_sparse_values(DType dtype, const void* data, size_t count,
                                         const uint32_t* indices, uint64_t seed, size_t kept,
                                         void* values, void* stream);

// As sparse_error: error = input - decode(message) in fp32.
ncclResult_t launch_sparse_error(DType dtype, const void* data, size_t count,
                                 const uint32_t* indices, uint64_t seed, size_t kept, bool scaled,
                                 float* error, void* stream);

}  // namespace terse
