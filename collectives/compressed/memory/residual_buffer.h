// A zero-initialised fp32 buffer in host or device memory that frees itself: the storage of one
// tensor's residual. Move-only, so an entry owns exactly one buffer.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/codec.h"

namespace terse {

class ResidualBuffer {
 public:
  ResidualBuffer() = default;
  ~ResidualBuffer();
  ResidualBuffer(ResidualBuffer&& other) noexcept;
  ResidualBuffer& operator=(ResidualBuffer&& other) noexcept;
  ResidualBuffer(const ResidualBuffer&) = delete;
  ResidualBuffer& operator=(const ResidualBuffer&) = delete;

  // Allocates `count` zeros. Host memory comes from calloc (the OS supplies zero pages lazily,
  // so a large residual costs nothing until touched). Device memory is cudaMalloc'd and zeroed
  // with cudaMemsetAsync on `stream`, so work the caller queues on that stream afterwards sees
  // zeros; builds without CUDA refuse device memory with ncclInvalidUsage. `what` names the
  // tensor in error messages.
  static ncclResult_t allocate(size_t count, Memory memory, void* stream, const char* what,
                               ResidualBuffer* buffer);

  float* data() const { return data_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(float); }
  Memory memory() const { return memory_; }

 private:
  void release();

  float* data_ = nullptr;
  size_t count_ = 0;
  Memory memory_ = Memory::kHost;
};

}  // namespace terse
