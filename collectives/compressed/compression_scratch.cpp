#include "collectives/compressed/compression_scratch.h"

#include <cstdint>

#include "collectives/in_flight_transfers.h"

namespace terse {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

CompressionScratch::CompressionScratch() : transfers_(std::make_unique<TransferSlots>()) {}

CompressionScratch::~CompressionScratch() = default;

uint8_t* CompressionScratch::bytes(ScratchSlot slot, size_t bytes) {
  Buffer& buffer = slots_[static_cast<int>(slot)];
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

size_t CompressionScratch::held_bytes() const {
  size_t total = encode_.held_bytes();
  for (const Buffer& buffer : slots_) total += buffer.capacity;
  return total;
}

}  // namespace terse
