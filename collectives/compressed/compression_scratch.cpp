#include "collectives/compressed/compression_scratch.h"

#include <cstdint>

#include "collectives/in_flight_transfers.h"

namespace terse {

CompressionScratch::CompressionScratch() : transfers_(std::make_unique<TransferSlots>()) {}

CompressionScratch::~CompressionScratch() = default;

uint8_t* CompressionScratch::bytes(ScratchSlot slot, size_t bytes) {
  bool grew = false;
  uint8_t* buffer = slots_[static_cast<int>(slot)].at_least(bytes, &grew);
  growths_ += grew ? 1 : 0;
  return buffer;
}

size_t CompressionScratch::held_bytes() const {
  size_t total = encode_.held_bytes();
  for (const GrowingBuffer& buffer : slots_) total += buffer.capacity();
  return total;
}

}  // namespace terse
