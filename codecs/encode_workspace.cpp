#include "codecs/encode_workspace.h"

namespace terse {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

void* EncodeWorkspace::bytes(int index, size_t bytes) {
  Buffer& buffer = buffers_[index];
  if (bytes <= buffer.capacity && buffer.aligned != nullptr) return buffer.aligned;
  // Grow by half again, so a slowly growing sequence of sizes does not reallocate every call.
  const size_t capacity = bytes + bytes / 2;
  buffer.storage.reset(new uint8_t[capacity + kAlignment]);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(buffer.storage.get());
  buffer.aligned = reinterpret_cast<uint8_t*>((raw + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
  buffer.capacity = capacity;
  ++growths_;
  return buffer.aligned;
}

size_t EncodeWorkspace::held_bytes() const {
  size_t total = 0;
  for (const Buffer& buffer : buffers_) total += buffer.capacity;
  return total;
}

}  // namespace terse
