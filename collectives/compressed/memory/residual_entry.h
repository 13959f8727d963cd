// What residual memory keeps for one tensor: its fp32 residual (error feedback) and the codec's
// per-tensor state, plus the two error-feedback steps that read and write the residual.
//
// One step of a compressed collective with memory `residual`:
//
//   entry->compensate(gradient, count, dtype, scratch, stream);   // scratch = g + e
//   EncodeContext context;  entry->attach_to(&context);            // error = e, state, memory
//   codec.encode(scratch, count, DType::kFloat32, context, ...);   // writes e = scratch - decode
//
// Codecs that cannot write EncodeContext::error call entry->update(scratch, decoded, ...) after
// decoding their own message instead. With memory `none` or `momentum` there is no residual:
// the caller encodes the gradient itself with attach_to()'s context (state only).
//
// An entry is not locked: one collective uses a given tensor at a time (NCCL orders operations
// on a communicator), and ResidualMemory hands entries out as shared_ptr so an eviction or reset
// from another thread never frees buffers still in use.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "codecs/codec.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "collectives/compressed/memory/residual_buffer.h"
#include "collectives/compressed/memory/tensor_key.h"

namespace terse {

class ResidualEntry {
 public:
  // Takes ownership of `residual` (empty unless kind is kResidual), `state` (may be null) and
  // `stage_residual` (empty unless the algorithm keeps a second residual, see below).
  ResidualEntry(TensorKey key, MemoryKind kind, std::string codec_spec, const MatrixShape& shape,
                ResidualBuffer residual, std::unique_ptr<CodecState> state,
                ResidualBuffer stage_residual = ResidualBuffer());

  // The key the entry was created for (for named tensors, the address of that first call).
  const TensorKey& key() const { return key_; }
  MemoryKind kind() const { return kind_; }
  // Where the residual lives: the memory kind of the tensor it compensates.
  Memory memory() const { return residual_.memory(); }
  // Canonical spec of the codec whose state this is (Codec::spec()).
  const std::string& codec_spec() const { return codec_spec_; }
  // The entry now serves codec `spec`: its residual is what the tensor's earlier calls did not
  // send, whichever stateless codec sent the rest (ResidualMemory::acquire decides when).
  void serve_codec(std::string spec) { codec_spec_ = std::move(spec); }
  const MatrixShape& shape() const { return shape_; }

  // The residual, key().count fp32 elements, zero at creation; null unless kind is kResidual.
  float* residual() const { return residual_.data(); }
  // The codec's state (momentum, warm-started Q), or null when the codec keeps none.
  CodecState* state() const { return state_.get(); }
  // The residual of a later lossy stage of the algorithm that reduces this tensor: what
  // scatter-reduce-allgather's owner dropped when it re-encoded its chunk's sum (its first
  // chunk-size elements). stage_count() fp32 zeros at creation, in the residual's memory kind
  // (memory()); null when the entry keeps none. It lives in the tensor's entry
  // so that residual memory admits (and evicts) both residuals of a tensor together.
  float* stage_residual() const { return stage_residual_.data(); }
  size_t stage_count() const { return stage_residual_.count(); }
  // Residual bytes plus the state's bytes now (the state may grow after creation) plus the
  // stage residual's.
  size_t bytes() const;

  // compensated[i] = input[i] (as fp32) + residual[i]. `count` and `dtype` must be the entry's;
  // `compensated` holds `count` fp32 values in the entry's memory kind and must not overlap the
  // residual (the encode reads it while writing the residual). Device work is ordered on
  // `stream`. Refused with ncclInvalidUsage when the entry keeps no residual.
  ncclResult_t compensate(const void* input, size_t count, DType dtype, float* compensated,
                          void* stream = nullptr) const;

  // residual[i] = compensated[i] - decoded[i]: the unfused update, for codecs and callers that
  // cannot pass EncodeContext::error. `decoded` holds `count` elements of `decoded_dtype` (the
  // decode of the message made from `compensated`).
  ncclResult_t update(const float* compensated, const void* decoded, DType decoded_dtype,
                      size_t count, void* stream = nullptr);

  // Points an encode at this entry: error = residual() (null without one), state = state(),
  // memory = memory(). The encode's input must then be compensate()'s output when there is a
  // residual, so the codec's error output is exactly the next residual.
  void attach_to(EncodeContext* context) const;

 private:
  // Refuses a call on an entry without residual, a count other than the entry's, or missing
  // buffers; `what` names the call in the message.
  ncclResult_t check_call(const char* what, size_t count, bool buffers_given) const;

  TensorKey key_;
  MemoryKind kind_;
  std::string codec_spec_;
  MatrixShape shape_;
  ResidualBuffer residual_;
  std::unique_ptr<CodecState> state_;
  ResidualBuffer stage_residual_;
};

}  // namespace terse
