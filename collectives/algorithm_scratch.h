// Temporary memory for one algorithm call (received pieces waiting to be reduced, the other half
// of a double buffer). When the call's caller lends memory it keeps across calls
// (AlgorithmContext::scratch, a ScratchLender), it comes from there. Otherwise, up to
// kRetainedScratchBytes, it comes from a buffer kept per thread across calls, so a steady stream
// of collectives from one thread allocates nothing and UCX keeps seeing the same pages; bigger
// requests, and a second scratch alive on the same thread, get their own allocation, freed with
// the object. Contents are uninitialised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace terse {

// 16 MiB: a few pipeline pieces of the ring, or a whole small-message buffer.
constexpr size_t kRetainedScratchBytes = size_t{16} << 20;

// Memory a caller keeps across calls and lends to the algorithm it runs, one AlgorithmScratch at
// a time (a thread's buffer dies with the thread: a caller whose calls come from ever new
// threads, or that must not allocate once warm whatever thread calls, lends its own).
class ScratchLender {
 public:
  // At least `bytes` bytes, valid until the next lend.
  virtual uint8_t* lend(size_t bytes) = 0;

 protected:
  ~ScratchLender() = default;
};

class AlgorithmScratch {
 public:
  // From `lender` when it is set (AlgorithmContext::scratch), else as the file comment says.
  explicit AlgorithmScratch(size_t bytes, ScratchLender* lender = nullptr);
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
