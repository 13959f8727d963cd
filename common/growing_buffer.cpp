#include "common/growing_buffer.h"

namespace terse {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

uint8_t* GrowingBuffer::at_least(size_t bytes, bool* grew) {
  *grew = false;
  if (bytes <= capacity_ && aligned_ != nullptr) return aligned_;
  const size_t capacity = bytes + bytes / 2;
  storage_.reset(new uint8_t[capacity + kAlignment]);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(storage_.get());
  aligned_ = reinterpret_cast<uint8_t*>((raw + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
  capacity_ = capacity;
  *grew = true;
  return aligned_;
}

}  // namespace terse
