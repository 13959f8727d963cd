#include "collectives/compressed/memory/memory_kind.h"

namespace terse {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kNone:
      return "none";
    case MemoryKind::kResidual:
      return "residual";
    case MemoryKind::kMomentum:
      return "momentum";
  }
  return "unknown";
}

bool parse_memory_kind(const std::string& text, MemoryKind* kind) {
  for (MemoryKind candidate : {MemoryKind::kNone, MemoryKind::kResidual, MemoryKind::kMomentum}) {
    if (text == memory_kind_name(candidate)) {
      *kind = candidate;
      return true;
    }
  }
  return false;
}

MemoryKind default_memory_kind(const Codec& codec) {
  if (!codec.stable_under_error_feedback()) return MemoryKind::kNone;
  switch (codec.id()) {
    case CodecId::kNone:
    case CodecId::kFp16:
    case CodecId::kBf16:
      return MemoryKind::kNone;
    case CodecId::kDgc:
      return MemoryKind::kMomentum;
    default:
      return MemoryKind::kResidual;
  }
}

}  // namespace terse
