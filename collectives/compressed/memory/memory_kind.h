// What a tensor remembers between steps when it is compressed (docs/design.md section 4).
//
//   none      nothing beyond what the codec itself keeps in its CodecState (PowerSGD's
//             warm-started Q still lives on). Each step's compression error is lost.
//   residual  error feedback: the entry keeps e, the fp32 residual of `count` elements. Each
//             step encodes g + e and stores the new e = (g + e) - decode(message) (fused into
//             the encode through EncodeContext::error).
//   momentum  DGC's momentum correction: the codec's CodecState keeps both the momentum u and
//             the accumulated velocity v (DGC's residual: v += m*u + g, send top-k of v, mask u
//             and v where sent). The two are updated together inside the codec, so the entry
//             holds no separate residual buffer and the caller neither compensates nor passes an
//             error buffer; it passes the raw gradient with EncodeContext::state. Only codecs
//             whose make_state() returns a state (dgc) can use it.
#pragma once

#include <cstdint>
#include <string>

#include "codecs/codec.h"

namespace terse {

enum class MemoryKind : uint8_t { kNone = 0, kResidual = 1, kMomentum = 2 };

// "none", "residual", "momentum": the names policy files and logs use.
const char* memory_kind_name(MemoryKind kind);

// Parses one of the names above; false for anything else.
bool parse_memory_kind(const std::string& text, MemoryKind* kind);

// What a rule gets when it names a codec but no memory:
//  - none for the casts (none, fp16, bf16): their error is unbiased rounding at the last bit of
//    a 16-bit float, and a 4-byte-per-element residual would cost more memory than the
//    compression saves on the wire;
//  - momentum for dgc, whose definition includes momentum correction;
//  - none for codecs whose errors are not a contraction (Codec::stable_under_error_feedback:
//    TernGrad, unbiased Random-K): they are unbiased instead, and a residual would grow without
//    bound;
//  - residual for every other lossy codec: without error feedback biased codecs (top-k, sign,
//    PowerSGD) do not converge to the same accuracy.
MemoryKind default_memory_kind(const Codec& codec);

}  // namespace terse
