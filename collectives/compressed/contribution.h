// The steps every compressed algorithm is built from: this rank's contribution with error
// feedback, encodes and decodes that are timed and counted, and writing the result. Keeping
// them here means the residual is applied the same way whatever the algorithm.
//
// First-stage error feedback (residual memory kind `residual`): the contribution is
// values = send + residual (fp32); each encode of a range of it writes the residual of that
// range (values - decode(message)) through EncodeContext::error, so the next step sends what
// this one dropped. Kind `momentum` (DGC) passes the raw gradient with the codec's state; kind
// `none` passes the raw gradient (state only for codecs that keep one).
//
// Re-encodes of partial sums (a ring hop, a tree level, an SRA owner's chunk) are not a
// rank's own gradient: the algorithm decides where their error goes. The SRA owner keeps a second
// residual of its own (stage_residual()); the ring keeps each hop's error in the tensor's
// residual range it encoded (every element is encoded once per rank per call, so the errors
// telescope, compressed_ring.cpp); recursive doubling and the tree drop it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>

#include "collectives/compressed/compressed_args.h"
#include "collectives/ring_pattern.h"

namespace terse {

// values[i] = send[i] (as fp32) + residual[i] (when the entry keeps a residual), for all
// args.count elements. `values` must hold args.count floats and may not be the residual.
// *finite says whether every value is finite (found in the same pass, so that the encodes of
// the contribution can skip the codec's own scan for non-finite values).
ncclResult_t make_contribution(const CompressedArgs& args, const CompressedContext& context,
                               float* values, bool* finite);

// The same for `range` only (values[range] written): lets a pipelined algorithm compensate each
// piece just before encoding it, so the first piece goes on the wire at once instead of after a
// pass over the whole tensor.
ncclResult_t make_contribution_range(const CompressedArgs& args, const CompressedContext& context,
                                     float* values, const ElementRange& range, bool* finite);

// The same written over the residual itself: residual[range] = send[range] (as fp32) +
// residual[range], for an algorithm that reads the contribution whole before it writes the
// residual (PowerSGD): one stream fewer than a separate buffer. Until the algorithm writes the
// error, the entry's residual holds the contribution. Requires call_residual(args).
ncclResult_t make_contribution_in_place(const CompressedArgs& args,
                                        const CompressedContext& context, const ElementRange& range,
                                        bool* finite);

// Encodes values[range] (this rank's contribution from make_contribution) into `message`
// (capacity bytes): with the residual's range as the error output, and with the codec state
// only when `range` is the whole tensor (states describe whole tensors). `finite`: what
// make_contribution found (true skips the codec's scan). Counts encode time.
ncclResult_t encode_contribution(const CompressedArgs& args, const CompressedContext& context,
                                 const float* values, const ElementRange& range, bool finite,
                                 void* message, size_t capacity, size_t* message_bytes);

// Whether compensate_and_encode runs fused for this call: the entry keeps a residual and the
// codec compensates inside its encode (Codec::fuses_compensation), so no fp32 contribution is
// ever stored.
bool fused_contribution(const CompressedArgs& args);

// make_contribution_range and encode_contribution of `range` in one: fused (one pass over send
// and the residual, Codec::encode_compensated; `values` untouched and may be null) when
// fused_contribution(args), else the two steps through values[range]. The message and the
// residual come out the same either way. Counts encode time.
ncclResult_t compensate_and_encode(const CompressedArgs& args, const CompressedContext& context,
                                   float* values, const ElementRange& range, void* message,
                                   size_t capacity, size_t* message_bytes);

// Encodes the range.count fp32 values at `values` that are not this rank's gradient (a partial
// sum of elements range.offset onwards), with `error` (range.count floats, may be null)
// receiving values - decode(message). No codec state.
ncclResult_t encode_partial(const CompressedArgs& args, const CompressedContext& context,
                            const float* values, const ElementRange& range, float* error,
                            void* message, size_t capacity, size_t* message_bytes);

// The seed of an encode of the elements from `offset` on: the call's seed mixed with the offset,
// so pieces of one tensor draw their stochastic rounding (and non-shared Random-K positions) from
// different streams, while every rank encoding the same range uses the same seed (a shared seed
// stays shared) and the whole tensor (offset 0) keeps the call's seed.
uint64_t range_seed(uint64_t call_seed, size_t offset);

// Decodes a message into `count` fp32 values at `output` (adding when `accumulate`). Counts
// decode time.
ncclResult_t decode_message(const CompressedArgs& args, const CompressedContext& context,
                            const void* message, size_t message_bytes, float* output, size_t count,
                            bool accumulate);

// Capacity a message of `count` elements may need (the codec's bound for fp32 input), rounded up
// to 64 bytes: algorithms lay messages out at multiples of it, and a codec reads its header and
// payload words in place, so every message must start aligned (an fp16 message of an odd count,
// or one with an escape section, would otherwise put the next one at an odd address).
size_t message_capacity(const CompressedArgs& args, size_t count);
constexpr size_t kMessageAlignment = 64;

// Where an algorithm may build its whole fp32 result: recv itself when the result is fp32 and
// unscaled (write_result then copies nothing: a pass over the tensor saved), else scratch `slot`.
// Only once send has been read for good (recv may be send).
float* result_buffer(const CompressedArgs& args, const CompressedContext& context,
                     ScratchSlot slot);

// recv[range] = sum[0 .. range.count) * args.result_scale, in args.dtype.
void write_result(const CompressedArgs& args, const float* sum, const ElementRange& range);

// The whole call on a group of one: recv = send (scaled), exactly; no residual is touched.
ncclResult_t copy_single_rank(const CompressedArgs& args);

// The residual of a later lossy stage of this tensor (an owner's re-encode in
// scatter-reduce-allgather), `count` fp32 values: the entry's stage residual
// (ResidualEntry::stage_residual), or null in *residual when the tensor keeps no residual. An
// entry with a residual but a stage residual shorter than `count` was made for another layout
// (EntryOptions::stage_count, CompressedAlgorithmInfo::stage_residual_elements): refused with
// ncclInternalError rather than run without the second error feedback.
ncclResult_t stage_residual(const CompressedArgs& args, size_t count, float** residual);

// Counts a message this rank sends.
// The residual of this call's elements (the entry's, from args.residual_offset), or null when
// the call keeps none.
inline float* call_residual(const CompressedArgs& args) {
  if (args.entry == nullptr || args.entry->residual() == nullptr) return nullptr;
  return args.entry->residual() + args.residual_offset;
}

inline void count_sent(const CompressedContext& context, size_t bytes) {
  if (context.counters == nullptr) return;
  context.counters->wire_bytes += bytes;
  context.counters->messages += 1;
}

}  // namespace terse
