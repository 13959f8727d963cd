// A 64-byte-aligned byte buffer that only grows, by half again beyond what is asked, so that a
// steady stream of equal requests allocates once and a slowly growing one rarely: the scratch
// of the compressed calls and the codecs' encode workspace are arrays of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace terse {

class GrowingBuffer {
 public:
  // At least `bytes` bytes; *grew says whether it had to allocate. Contents do not survive a
  // growth.
  uint8_t* at_least(size_t bytes, bool* grew);
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* aligned_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace terse
