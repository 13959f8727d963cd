// The one interface every codec implements (DESIGN.md section 4).
//
// A codec turns `count` elements (fp32, fp16 or bf16; computed in fp32) into a self-describing
// message (see wire_format.h) and back. Decoding can accumulate into the output so reductions
// never materialise a temporary. Pointers are host memory, or device memory when the context
// says so (then the call is ordered on the given CUDA stream).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "codecs/dtype.h"

namespace terse {

// Wire identifiers: stable, stored in every message header. Never renumber.
enum class CodecId : uint8_t {
  kNone = 0,
  kFp16 = 1,
  kBf16 = 2,
  kInt8 = 3,
  kInt4 = 4,
  kInt2 = 5,
  kQsgd = 6,
  kTernGrad = 7,
  kSign = 8,
  kTopK = 9,
  kRandomK = 10,
  kThreshold = 11,
  kDgc = 12,
  kPowerSgd = 13,
};

// What the collective algorithms need to know about a codec's payload.
enum class CodecFamily : uint8_t {
  kDense,    // one value per element (casts and quantizers): chunkable, scatter-reduce friendly
  kSparse,   // (index, value) lists: allgather and scatter-add
  kLowRank,  // matrix factors: allreduce of the factors
};

enum class Memory : uint8_t { kHost = 0, kDevice = 1 };

// Per-tensor state a codec keeps between calls (DGC's momentum, PowerSGD's warm-started Q).
// Owned by the caller (residual memory), created by Codec::make_state.
class CodecState {
 public:
  virtual ~CodecState() = default;
  // Bytes held, for the residual memory's byte cap.
  virtual size_t bytes() const = 0;
};

// A matrix view of a tensor (PowerSGD). rows * cols must equal the element count; {0, 0} asks
// the codec to pick a near-square view.
struct MatrixShape {
  size_t rows = 0;
  size_t cols = 0;
};

struct EncodeContext {
  // Drives stochastic rounding and random selection. Ranks that must agree (Random-K with a
  // shared seed) pass the same value; it travels in the header.
  uint64_t seed = 0;
  // Training step of this tensor, for schedules (DGC warm-up).
  uint64_t step = 0;
  // Progress through the policy's warm-up ramp, in (0, 1]; 1 outside a ramp. Sparsifiers keep
  // a density of target^progress (from dense toward the target, as DGC's warm-up does);
  // quantizers and casts ignore it.
  double warmup_progress = 1.0;
  // When set, receives input - decode(message) per element in fp32 (same memory kind as the
  // input): error feedback without a second decode pass.
  float* error = nullptr;
  // The caller has already checked that every input element is finite (for example while it
  // produced them): Codec::encode then skips its own scan, a pass over the input that costs as
  // much as a fast codec's encode when the input is not in cache. Set it only when true.
  bool input_finite = false;
  // Required by codecs whose make_state() returns non-null; null otherwise.
  CodecState* state = nullptr;
  MatrixShape shape;
  Memory memory = Memory::kHost;
  void* stream = nullptr;  // cudaStream_t when memory == Memory::kDevice
};

struct DecodeContext {
  Memory memory = Memory::kHost;
  void* stream = nullptr;  // cudaStream_t when memory == Memory::kDevice
};

// Non-finite inputs (DESIGN.md section 4: as in NCCL, a NaN/Inf at element i makes element i of
// the result non-finite and nothing else). Codec::encode scans its input; when it holds NaN or
// Inf, the codec encodes a copy with those elements set to zero, the error output is zero there
// (so a residual never holds a non-finite value), and the message carries the escaped elements
// exactly in an escape section after the codec's own bytes (nonfinite_escapes.h; header flag
// kWireEscapesFlag). Codec::decode writes (or, accumulating, adds) them back after decoding the
// rest. Codec implementations therefore only ever see finite values: they implement
// encode_finite, decode_finite and max_finite_bytes, and the base class does the rest.
// Device memory is passed through unchanged (no scan; a device decode refuses escapes).
class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  virtual CodecFamily family() const = 0;
  // Canonical spec with every parameter spelled out, e.g. "int8:block=256,rounding=nearest".
  virtual std::string spec() const = 0;

  // Upper bound of a message for `count` elements of `dtype`, header and a worst-case escape
  // section included: the capacity every encode of `count` elements may need.
  size_t max_encoded_bytes(size_t count, DType dtype) const;

  // Whether error feedback stays bounded with this codec: its error x - C(x) is smaller than x
  // (a contraction), so a residual fed back shrinks. Unbiased scalings are not: TernGrad sends
  // a small element as the block's maximum, Random-K's unbiased decode multiplies a kept element
  // by n/k, and a residual fed back through them grows every step (measured: from 5 to 10^6 in
  // 24 steps of recursive doubling on 5 ranks). The policy refuses memory 'residual' for them.
  virtual bool stable_under_error_feedback() const { return true; }

  // Whether what it drops averages out over steps without error feedback: the decode is
  // unbiased, E[decode(encode(x))] = x (QSGD, TernGrad without clipping, unbiased Random-K,
  // stochastic integer rounding), or the codec is a cast whose rounding sits at the last bit of
  // a 16-bit float (none, fp16, bf16). A biased codec (sign, top-k, nearest rounding) run without
  // error feedback loses the same part of a persistent gradient every step. Only such codecs may
  // be a policy rule's `fallback`: the path of a tensor residual memory did not admit.
  virtual bool unbiased() const { return false; }

  // Per-tensor state this codec needs, or null when it keeps none.
  virtual std::unique_ptr<CodecState> make_state(size_t count, DType dtype,
                                                 const MatrixShape& shape) const {
    (void)count;
    (void)dtype;
    (void)shape;
    return nullptr;
  }

  // Encodes `count` elements of `input` into `message` (capacity `capacity` bytes) and sets
  // `*message_bytes`. Fails with ncclInvalidArgument when the capacity is short. Non-finite
  // elements are escaped (see above).
  ncclResult_t encode(const void* input, size_t count, DType dtype, const EncodeContext& context,
                      void* message, size_t capacity, size_t* message_bytes);

  // Decodes a message of `message_bytes` into `count` elements of `output` (overwriting, or
  // adding when `accumulate`). Validates the whole message first: a truncated, corrupted or
  // mismatched message is refused with ncclInvalidArgument and nothing is read or written out
  // of bounds.
  ncclResult_t decode(const void* message, size_t message_bytes, void* output, size_t count,
                      DType dtype, bool accumulate, const DecodeContext& context) const;

 protected:
  // What each codec implements: the same contracts, for inputs that are all finite and messages
  // without an escape section (read_header hides kWireEscapesFlag from them).
  virtual size_t max_finite_bytes(size_t count, DType dtype) const = 0;
  virtual ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                                     const EncodeContext& context, void* message, size_t capacity,
                                     size_t* message_bytes) = 0;
  virtual ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output,
                                     size_t count, DType dtype, bool accumulate,
                                     const DecodeContext& context) const = 0;
};

const char* codec_family_name(CodecFamily family);

}  // namespace terse
