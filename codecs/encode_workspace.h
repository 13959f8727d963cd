// Host memory for an encode's temporaries (top-k's candidates, keys, sample and histograms), lent
// by the caller through EncodeContext::workspace and kept across calls: a few numbered buffers,
// each of which only grows, so that once a caller has encoded its largest tensor no encode
// allocates. A communicator keeps one in its compressed calls' scratch (compression_scratch.h):
// a per-thread buffer would not do, since a thread's buffer dies with it and an application may
// call from ever new threads. Codecs that get none use a per-thread one of their own.
//
// Buffers never alias one another; contents are uninitialised and do not survive from one encode
// to the next. Not thread-safe: one encode at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/growing_buffer.h"

namespace terse {

class EncodeWorkspace {
 public:
  static constexpr int kBuffers = 5;

  EncodeWorkspace() = default;
  EncodeWorkspace(const EncodeWorkspace&) = delete;
  EncodeWorkspace& operator=(const EncodeWorkspace&) = delete;

  // At least `bytes` bytes of buffer `index` (0 <= index < kBuffers), 64-byte aligned; grown
  // (contents lost) when smaller.
  void* bytes(int index, size_t bytes);
  template <typename T>
  T* array(int index, size_t count) {
    return static_cast<T*>(bytes(index, count * sizeof(T)));
  }

  // Bytes held by every buffer together.
  size_t held_bytes() const;
  // How many times a buffer had to grow.
  uint64_t growths() const { return growths_; }

 private:
  GrowingBuffer buffers_[kBuffers];
  uint64_t growths_ = 0;
};

}  // namespace terse
