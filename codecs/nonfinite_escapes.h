// Non-finite elements carried exactly beside a codec's message (docs/design.md section 4).
//
// Quantizers and sparsifiers compute scales, norms and selections over blocks; one Inf or NaN
// would poison its whole block (or be refused). So Codec::encode (codec.h) takes the non-finite
// elements out first: the codec encodes the tensor with them set to zero, and their positions
// and kinds follow the codec's bytes in an escape section; decode writes them back. A message
// with an escape section has kWireEscapesFlag in its header's flags.
//
// Escape section, after the codec's own bytes (its length follows from the trailer):
//
//   body     list: m uint32 indices (strictly increasing, < count), then m kind bytes
//            map:  ceil(count / 4) bytes, 2 bits per element (element i in byte i / 4 at bit
//                  2 (i % 4)): 0 finite, else its kind; exactly m non-zero codes, spare bits 0
//   trailer  uint32 magic "ESC1", uint8 form (1 list, 2 map), 3 zero bytes, uint64 m
//
// The kinds are EscapeKind: +Inf, -Inf, NaN (a NaN's payload is not kept). The encoder writes
// whichever form is smaller (a list only while indices fit 32 bits), so a section never exceeds
// ceil(count / 4) + 16 bytes (max_escape_section_bytes) and a tensor without non-finite values
// costs nothing on the wire. Device tensors are scanned on the device; one that holds non-finite
// values is encoded through the host (codec.cpp), and device decodes apply a section's escapes
// with a kernel.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/dtype.h"

namespace terse {

enum class EscapeKind : uint8_t { kPositiveInfinity = 1, kNegativeInfinity = 2, kNaN = 3 };

// The non-finite elements of a tensor, in increasing index order.
struct Escapes {
  std::vector<uint64_t> indices;
  std::vector<EscapeKind> kinds;
  size_t size() const { return indices.size(); }
};

// Whether every one of `count` elements of `input` (host memory) is finite: one pass, no branch
// per element (the common case costs a read of the input).
bool all_finite(const void* input, size_t count, DType dtype);

// The non-finite elements of `input` (host memory).
Escapes find_escapes(const void* input, size_t count, DType dtype);

// `input` with its escaped elements replaced by zero, in its own dtype.
std::vector<uint8_t> zero_escaped(const void* input, size_t count, DType dtype,
                                  const Escapes& escapes);

// Bytes of the section that write_escapes writes for `escapes` of a `count`-element tensor, and
// the most any section of such a tensor takes.
size_t escape_section_bytes(const Escapes& escapes, size_t count);
size_t max_escape_section_bytes(size_t count);

// Writes the section (escape_section_bytes of it) at `out`.
void write_escapes(const Escapes& escapes, size_t count, uint8_t* out);

// Reads and validates the section at the end of a `message_bytes`-byte message describing
// `count` elements, which must leave at least `min_rest` bytes before it. Sets *section_bytes.
// Refuses (ncclInvalidArgument, naming what is wrong) anything malformed.
ncclResult_t read_escapes(const uint8_t* message, size_t message_bytes, size_t count,
                          size_t min_rest, Escapes* escapes, size_t* section_bytes);

// Whether the section read_escapes accepted at the end of `message` is the list form (else the
// map): for a device decode, whose kernel reads the section's body where it lies.
bool escapes_listed(const uint8_t* message, size_t message_bytes);

// output[i] = v (or output[i] + v when `accumulate`) for every escaped element i, v being its
// kind's value (+Inf, -Inf, quiet NaN), in `dtype`.
void apply_escapes(const Escapes& escapes, void* output, DType dtype, bool accumulate);

}  // namespace terse
