// How a 64-bit UCX tag is laid out. UCX matches a receive against incoming tags only (under a
// mask), never against the sender, so everything a receive must tell apart lives in the tag:
//
//   bit 63            48 47                                  16 15            0
//       | communicator  |              operation              |  source rank  |
//           16 bits                      32 bits                    16 bits
//
//   operation:  bit 31 = control (transport-internal barrier / allgather traffic)
//               bits 30..12 = sequence (the collective's number, wrapping at 2^19)
//               bits 11..0  = step within the operation (wrapping at 4096)
//
// Receives match the full tag (kMatchWholeTag), so a receive accepts one sender's message of one
// step of one operation of one communicator. Wrapping is safe: UCX delivers messages with equal
// tags from one sender in the order they were sent (like MPI's non-overtaking rule), and no
// rank has 2^19 operations in flight. Each communicator also has its own UCX worker, so the
// communicator field is a second guard (and keeps tags distinct should workers ever be shared).
#pragma once

#include <cstdint>

namespace terse {

constexpr int kTagSourceBits = 16;
constexpr int kTagOperationBits = 32;
constexpr int kTagCommunicatorBits = 16;
constexpr int kOperationStepBits = 12;
constexpr int kOperationSequenceBits = 19;

constexpr uint64_t kMatchWholeTag = ~0ull;
// Ranks must fit the source field.
constexpr int kMaxTaggedRanks = 1 << kTagSourceBits;
constexpr uint32_t kControlOperationBit = 1u << 31;
constexpr uint32_t kOperationStepMask = (1u << kOperationStepBits) - 1;
constexpr uint32_t kOperationSequenceMask = (1u << kOperationSequenceBits) - 1;

struct TagFields {
  uint16_t communicator;
  uint32_t operation;
  uint16_t source_rank;
};

constexpr uint64_t make_tag(uint16_t communicator, uint32_t operation, uint16_t source_rank) {
  return (static_cast<uint64_t>(communicator) << (kTagOperationBits + kTagSourceBits)) |
         (static_cast<uint64_t>(operation) << kTagSourceBits) | source_rank;
}

constexpr TagFields split_tag(uint64_t tag) {
  return TagFields{static_cast<uint16_t>(tag >> (kTagOperationBits + kTagSourceBits)),
                   static_cast<uint32_t>(tag >> kTagSourceBits),
                   static_cast<uint16_t>(tag & ((1u << kTagSourceBits) - 1))};
}

// A data operation (control bit clear); `sequence` and `step` wrap at their field widths.
constexpr uint32_t make_operation(uint32_t sequence, uint32_t step) {
  return ((sequence & kOperationSequenceMask) << kOperationStepBits) | (step & kOperationStepMask);
}

// The transport's own barrier and allgather messages.
constexpr uint32_t make_control_operation(uint32_t sequence, uint32_t step) {
  return kControlOperationBit | make_operation(sequence, step);
}

constexpr bool is_control_operation(uint32_t operation) {
  return (operation & kControlOperationBit) != 0;
}
constexpr uint32_t operation_sequence(uint32_t operation) {
  return (operation >> kOperationStepBits) & kOperationSequenceMask;
}
constexpr uint32_t operation_step(uint32_t operation) {
  return operation & kOperationStepMask;
}

}  // namespace terse
