// Host-side steps that every sparse encoder shares once it knows which elements it keeps:
// copying their values into the message and writing EncodeContext::error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// values[j] = data[indices[j]] (or stratum_pick(seed, j, count, kept) when indices is null),
// copied in the storage type of `dtype`, so 16-bit inputs stay 16-bit and nothing is rounded.
void gather_sparse_values(DType dtype, const void* data, size_t count, const uint32_t* indices,
                          uint64_t seed, size_t kept, void* values);

// error = input - decode(message) in fp32: the input where nothing was kept, and
// x - x * (scaled ? length of stratum j : 1) at kept element j (0 for finite x, NaN for inf/NaN,
// as a decode would give).
void sparse_error(DType dtype, const void* data, size_t count, const uint32_t* indices,
                  uint64_t seed, size_t kept, bool scaled, float* error);

}  // namespace terse
