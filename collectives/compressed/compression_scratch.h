// Scratch memory of compressed collectives, kept per communicator across calls (issue: "scratch
// buffers are reused, never allocated per call on the hot path"). A handful of numbered slots,
// each a buffer that only grows: once a communicator has seen its largest tensor, no call
// allocates, and UCX keeps seeing the same (registered) pages.
//
// Algorithms name the slots they use with ScratchSlot; two slots never alias. Contents are
// uninitialised and do not survive from one call to the next. Not thread-safe: one call on a
// communicator at a time (the communicator serialises them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/growing_buffer.h"

#include "codecs/encode_workspace.h"

namespace terse {

class TransferSlots;  // collectives/in_flight_transfers.h

enum class ScratchSlot : int {
  kValues = 0,   // this rank's fp32 contribution (gradient + residual)
  kAccumulator,  // fp32 running sum
  kOutgoing,     // encoded messages this rank sends
  kIncoming,     // encoded messages this rank receives
  kSecondary,    // whatever else an algorithm needs (sizes, factors, a second sum)
  kTertiary,
  kHierarchy,  // hierarchical: the node-level sum handed to the inner algorithm
  kGroupSum,   // group_allreduce_sum: the dense ring's received pieces
  kCount,
};

class CompressionScratch {
 public:
  CompressionScratch();
  ~CompressionScratch();
  CompressionScratch(const CompressionScratch&) = delete;
  CompressionScratch& operator=(const CompressionScratch&) = delete;

  // At least `bytes` bytes in `slot` (64-byte aligned), grown (contents lost) when smaller.
  uint8_t* bytes(ScratchSlot slot, size_t bytes);
  float* floats(ScratchSlot slot, size_t count) {
    return reinterpret_cast<float*>(bytes(slot, count * sizeof(float)));
  }

  // The codec's temporaries of the call's host encodes (EncodeContext::workspace, passed by
  // contribution.h): apart from every slot.
  EncodeWorkspace* encode_workspace() { return &encode_; }
  // Request slots for an algorithm whose transfers outnumber InFlightTransfers::kInlineSlots
  // (sparse allgather's chunks), lent to one InFlightTransfers at a time.
  TransferSlots* transfer_slots() { return transfers_.get(); }

  // Bytes held by every slot and the encode workspace together (statistics).
  size_t held_bytes() const;
  // How many times a slot or an encode workspace buffer had to grow (a steady stream of equal
  // calls stops growing after the first; tests check that).
  uint64_t growths() const { return growths_ + encode_.growths(); }

 private:
  GrowingBuffer slots_[static_cast<int>(ScratchSlot::kCount)];
  uint64_t growths_ = 0;
  EncodeWorkspace encode_;
  std::unique_ptr<TransferSlots> transfers_;
};

}  // namespace terse
