#include "codecs/encode_workspace.h"

namespace terse {

void* EncodeWorkspace::bytes(int index, size_t bytes) {
  bool grew = false;
  uint8_t* buffer = buffers_[index].at_least(bytes, &grew);
  growths_ += grew ? 1 : 0;
  return buffer;
}

size_t EncodeWorkspace::held_bytes() const {
  size_t total = 0;
  for (const GrowingBuffer& buffer : buffers_) total += buffer.capacity();
  return total;
}

}  // namespace terse
