// Temporary memory for one algorithm call (received pieces waiting to be reduced, the other half
// of a double buffer). Up to kRetainedScratchBytes it comes from a buffer kept per thread across
// calls, so a steady stream of collectives allocates nothing and UCX keeps seeing the same
// pages; bigger requests, and a second scratch alive on the same thread, get their own
// allocation, freed with the object. Contents are uninitialised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace terse {

// 16 MiB: a few pipeline pieces of the ring, or a whole small-message buffer.
constexpr size_t kRetainedScratchBytes = size_t{16} << 20;

class AlgorithmScratch {
 public:
  explicit AlgorithmScratch(size_t bytes);
  ~AlgorithmScratch();
  AlgorithmScratch(const AlgorithmScratch&) = delete;
  AlgorithmScratch& operator=(const AlgorithmScratch&) = delete;

  uint8_t* data() { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  bool borrowed_thread_buffer_ = false;
  std::unique_ptr<uint8_t[]> own_;
};

}  // namespace terse
