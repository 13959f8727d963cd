// The (index, value) message that topk, randomk, threshold and dgc share, and its validating
// decoder.
//
// Layout after the 32-byte header (wire_format.h):
//   header.param0  k, the number of elements carried (k <= count)
//   header.param1  the DType of the values: the input's own type for topk, threshold and randomk
//                  (their values are input elements, so this is lossless and halves the value
//                  bytes of fp16/bf16 inputs); fp32 for dgc (its values are fp32 velocities)
//   header.flags   kSparseImplicitIndices, kSparseStratumScaled (randomk only; 0 otherwise)
//   header.seed    randomk: the seed its indices are drawn from; 0 otherwise
//   payload        k uint32 indices, strictly increasing (omitted with kSparseImplicitIndices),
//                  then k values of the value type
// Sorted indices make CPU and GPU bytes identical and let the decoder check uniqueness and bounds
// in one pass. Decoding refuses anything else before it writes: a length that differs from what
// the header implies, k > count, an unknown flag or value type, an index >= count or not above
// its predecessor (or, for randomk, outside its stratum). Non-accumulating decode zeroes the
// output and scatters; accumulating decode adds at the carried indices only.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/codec.h"
#include "codecs/wire_format.h"

namespace terse {

// Indices are not sent: the decoder regenerates them from header.seed (randomk, shared seed).
constexpr uint8_t kSparseImplicitIndices = 1;
// Value j is multiplied by the length of stratum j on decode (randomk, unbiased).
constexpr uint8_t kSparseStratumScaled = 2;

struct SparseLayout {
  size_t kept = 0;
  DType value_type = DType::kFloat32;
  bool explicit_indices = true;

  size_t values_offset() const { return kWireHeaderBytes + (explicit_indices ? 4 * kept : 0); }
  size_t bytes() const { return values_offset() + kept * dtype_size(value_type); }
};

// The header of a sparse message of `layout` for `count` elements of `dtype`.
WireHeader sparse_header(CodecId id, DType dtype, size_t count, const SparseLayout& layout,
                         uint8_t flags, uint64_t seed);

// Writes `header` at the start of `message`, host or device memory.
ncclResult_t write_sparse_header(void* message, const WireHeader& header, Memory memory,
                                 void* stream);

// What one codec's decoder accepts.
struct SparseRules {
  const char* codec;      // for error messages
  CodecId id;             // expected in the header
  bool fp32_values;       // values are fp32 whatever the input type (dgc)
  uint8_t allowed_flags;  // flags this codec may set
};

// Validates and decodes a sparse message (host or device memory, per `context`).
ncclResult_t decode_sparse(const SparseRules& rules, const void* message, size_t message_bytes,
                           void* output, size_t count, DType dtype, bool accumulate,
                           const DecodeContext& context);

}  // namespace terse
