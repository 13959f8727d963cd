#include "collectives/algorithm_scratch.h"

namespace terse {
namespace {

struct ThreadScratch {
  std::unique_ptr<uint8_t[]> buffer;
  size_t bytes = 0;
  bool in_use = false;
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

}  // namespace

AlgorithmScratch::AlgorithmScratch(size_t bytes, ScratchLender* lender) : bytes_(bytes) {
  if (bytes == 0) return;
  if (lender != nullptr) {
    data_ = lender->lend(bytes);
    return;
  }
  ThreadScratch& shared = thread_scratch();
  if (bytes <= kRetainedScratchBytes && !shared.in_use) {
    if (shared.bytes < bytes) {
      // Grow in powers of two so that a slowly growing size does not reallocate every call.
      size_t grown = size_t{64} << 10;
      while (grown < bytes) grown *= 2;
      shared.buffer.reset(new uint8_t[grown]);
      shared.bytes = grown;
    }
    shared.in_use = true;
    borrowed_thread_buffer_ = true;
    data_ = shared.buffer.get();
    return;
  }
  own_.reset(new uint8_t[bytes]);
  data_ = own_.get();
}

AlgorithmScratch::~AlgorithmScratch() {
  if (borrowed_thread_buffer_) thread_scratch().in_use = false;
}

}  // namespace terse
