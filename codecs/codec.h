// The one interface every codec implements (docs/design.md section 4).
//
// A codec turns `count` elements (fp32, fp16, bf16 or fp8; computed in fp32) into a self-describing
// message (see wire_format.h) and back. Decoding can accumulate into the output so reductions
// never materialise a temporary. Pointers are host memory, or device memory when the context
// says so (then the call is ordered on the given CUDA stream).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "codecs/codec_capabilities.h"
#include "codecs/dtype.h"

namespace terse {

class EncodeWorkspace;  // encode_workspace.h

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
  kMxfp8 = 14,
  kMxfp4 = 15,
  kNvfp4 = 16,
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
  // The factors of a low-rank codec's state (PowerSGD's warm-start Q), or null for any other.
  virtual LowRankFactors* low_rank_factors() { return nullptr; }
};

// A matrix view of a tensor (PowerSGD). rows * cols must equal the element count; {0, 0} asks
// the codec to pick a near-square view.
struct MatrixShape {
  size_t rows = 0;
  size_t cols = 0;
};

// Device memory passed to encode, encode_compensated and decode must be aligned as the kernels
// access it: a tensor (input, output) to its element size, a residual or error output to 4
// bytes, a message to kDeviceMessageAlignment (its scales, indices and factors are 4-byte
// words). Anything else is refused with ncclInvalidArgument naming the pointer. Host memory has
// no such rule.
constexpr size_t kDeviceMessageAlignment = 4;

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
  // Host memory for the encode's temporaries, kept by the caller across calls so that a warm
  // encode allocates nothing (encode_workspace.h; top-k's selection uses it). Null: the codec
  // uses a per-thread one.
  EncodeWorkspace* workspace = nullptr;
  MatrixShape shape;
  Memory memory = Memory::kHost;
  void* stream = nullptr;  // cudaStream_t when memory == Memory::kDevice
};

struct DecodeContext {
  Memory memory = Memory::kHost;
  void* stream = nullptr;  // cudaStream_t when memory == Memory::kDevice
  // With Memory::kDevice: the same message's bytes in host memory (those the device message was
  // copied from). The header and, for the casts, the blockwise quantizers (int8/4/2, QSGD,
  // TernGrad, sign) and the sparse messages (their indices), the payload are then validated
  // from it on the host, and the decode only enqueues its kernels: nothing waits for the
  // stream. Null: what is validated is read from the device message, which waits for the
  // stream.
  const void* host_message = nullptr;
};

// Non-finite inputs (docs/design.md section 4: as in NCCL, a NaN/Inf at element i makes element i
// of the result non-finite and nothing else). Codec::encode scans its input; when it holds NaN or
// Inf, the codec encodes a copy with those elements set to zero, the error output is zero there
// (so a residual never holds a non-finite value), and the message carries the escaped elements
// exactly in an escape section after the codec's own bytes (nonfinite_escapes.h; header flag
// kWireEscapesFlag). Codec::decode writes (or, accumulating, adds) them back after decoding the
// rest. Codec implementations therefore only ever see finite values: they implement
// encode_finite, decode_finite and max_finite_bytes, and the base class does the rest.
// Device memory is scanned on the device (a kernel and a wait); a tensor that holds NaN or Inf is
// copied to the host and encoded there, with its escapes, and the message (and error or residual)
// copied back, so device and host messages are the same bytes. Codecs that keep device state
// refuse such a tensor. A device decode applies a message's escapes with a kernel.
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

  // ---- Capabilities: what collectives and the planner ask instead of parsing spec() ----

  // Whether messages are linear: the messages that ranks encode in one collective call (same
  // count and dtype, finite inputs, full warm-up progress, and the same EncodeContext::seed where
  // needs_shared_seed()) hold each element's value at the same payload position in the same
  // units, with nothing per message that the values depend on (no per-block scale, minimum or
  // norm, no index list of its own, no rounding drawn from the data). Adding two such messages'
  // payloads element-wise in the payload's element type, header unchanged, then gives a valid
  // message with decode(a (+) b) = decode(a) + decode(b), up to one rounding of each sum to the
  // payload's element type (as a re-encode of the sum would round). An algorithm may then reduce
  // payloads (a dense allreduce of the message's values) without decoding and re-encoding.
  // True: none, fp16, bf16 (the payload is the values in the wire type), Random-K with
  // shared_seed (the same positions on every rank; its stratum scaling is applied on decode and
  // is linear). False: the blockwise quantizers, QSGD, TernGrad and sign (per-block scales differ
  // between ranks), top-k, threshold, DGC and Random-K without a shared seed (each rank's own
  // positions), PowerSGD (see LowRankParams: its steps are linear, its message is not).
  virtual bool linear() const { return false; }

  // Whether every rank must pass the same EncodeContext::seed for the collective to be correct
  // (Random-K with shared_seed: the decoder draws the positions from the seed in the header, so
  // the ranks' kept positions line up only under one seed). Other codecs use the seed for their
  // own rounding or sampling only, and any per-rank seed is fine.
  virtual bool needs_shared_seed() const { return false; }

  // Whether make_state(count, dtype, shape) returns a state (a non-null CodecState that the
  // caller must keep per tensor and pass in EncodeContext::state), answered without making one.
  // DGC always; PowerSGD for tensors it does not send dense (a valid shape whose factors are
  // smaller than the tensor); no other codec.
  virtual bool stateful(size_t count, DType dtype, const MatrixShape& shape) const {
    (void)count;
    (void)dtype;
    (void)shape;
    return false;
  }

  // The bytes of a message of `count` finite elements of `dtype` (a PowerSGD tensor viewed as
  // `shape`; {0, 0}: the near-square view), header included, no escape section, at full warm-up
  // progress and after any step schedule (DGC's warm-up): what the cost model counts as the
  // bytes one encode puts on the wire. Exact (every such encode gives this size) for every codec
  // but these, where it is the most an encode gives: top-k and DGC with method=sampled (k' <= k
  // kept, usually k), threshold (the count that passes depends on the data; the bound is every
  // element). max_encoded_bytes stays the capacity bound (warm-up, escapes, data).
  virtual size_t wire_bytes(size_t count, DType dtype, const MatrixShape& shape) const = 0;

  // The stated per-encode error bound on tensors of `count` elements (see ErrorBound; Random-K's
  // depends on the count through its strata). stated = false when the codec states none.
  virtual ErrorBound error_bound(size_t count) const {
    (void)count;
    return ErrorBound{};
  }

  // A low-rank codec's parameters (PowerSGD), or null for any other codec. Its states answer
  // CodecState::low_rank_factors().
  virtual const LowRankParams* low_rank() const { return nullptr; }

  // Whether what the codec keeps is a fixed fraction of any tensor's elements whatever the data
  // (top-k by ratio), so that a tensor may be encoded as consecutive parts, each encoded as a
  // tensor of its own that keeps that fraction of itself: sparse allgather then selects and
  // sends part by part (collectives/compressed/sparse_allgather.cpp). Each part's message is at
  // most wire_bytes(part) plus an escape section. False for a fixed count (top-k with k=: every
  // part would keep k), for codecs with state, and for sizes that depend on the data.
  virtual bool keeps_fraction() const { return false; }

  // Whether encode_compensated is one pass over the tensor (fused error feedback, docs/design.md
  // section 3) rather than the generic compensate-then-encode.
  virtual bool fuses_compensation() const { return false; }
  // Whether encode_compensated also takes device memory (context.memory == Memory::kDevice):
  // one kernel reads input and residual, encodes, and writes the new residual, so the device
  // path never stores the compensated tensor. Device messages carry no escapes (as encode's).
  virtual bool fuses_device_compensation() const { return false; }

  // Per-tensor state this codec needs, or null when it keeps none (stateful() says which without
  // making one).
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

  // Error feedback and encode in one: encodes v[i] = input[i] (as fp32) + residual[i] exactly as
  // encode(v, count, DType::kFloat32, context with error = residual) would, and leaves
  // residual[i] = v[i] - decode(message)[i]. The residual is read as the compensation and
  // written as the error; v is never stored when fuses_compensation() (the codec's own pass),
  // and is built in a temporary otherwise. Host memory, or device memory where
  // fuses_device_compensation(); context.error is ignored.
  ncclResult_t encode_compensated(const void* input, DType dtype, float* residual, size_t count,
                                  const EncodeContext& context, void* message, size_t capacity,
                                  size_t* message_bytes);

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
  // The fused pass of encode_compensated, for codecs that answer fuses_compensation() (host
  // memory) or fuses_device_compensation() (device memory, asynchronous on context.stream): as
  // encode_finite of v, the residual receiving the error. When it finds a non-finite v on the
  // host it sets *finite = false and leaves v in the residual, every element of it, and nothing
  // else (encode_compensated then escapes them through encode).
  virtual ncclResult_t encode_compensated_finite(const void* input, DType dtype, float* residual,
                                                 size_t count, const EncodeContext& context,
                                                 void* message, size_t capacity,
                                                 size_t* message_bytes, bool* finite);

 private:
  // The rare device paths of non-finite values (above): the tensor (and residual) copied to the
  // host and encoded there, the results copied back; a device decode of an escaped message.
  ncclResult_t encode_device_through_host(const void* input, size_t count, DType dtype,
                                          const EncodeContext& context, void* message,
                                          size_t capacity, size_t* message_bytes);
  ncclResult_t encode_compensated_through_host(const void* input, DType dtype, float* residual,
                                               size_t count, const EncodeContext& context,
                                               void* message, size_t capacity,
                                               size_t* message_bytes);
  ncclResult_t decode_device(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate, const DecodeContext& context) const;
};

const char* codec_family_name(CodecFamily family);

}  // namespace terse
