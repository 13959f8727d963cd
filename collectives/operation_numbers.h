// How one communicator's messages are numbered apart. The tag layout (transport/tag_layout.h)
// gives every data message a 19-bit sequence and a 12-bit step; this file splits the sequence
// space between the two kinds of traffic, which count differently:
//
//   collectives   bit 18 clear: a per-communicator counter of collective calls. Every rank calls
//                 the collectives of a communicator in the same order, so the counters agree.
//   send / recv   bit 18 set: a counter per peer and direction (the n-th send from A to B meets
//                 B's n-th receive from A), since only two ranks take part in each.
//
// Both wrap (at 2^18 collectives; at 2^18 messages per peer and direction). That is safe for
// the same reason the step's wrap is: UCX matches messages that carry equal tags from one
// sender in the order they were sent, and every algorithm posts the receives for one sender
// in the order that sender sends.
#pragma once

#include <cstdint>

namespace terse {

constexpr uint32_t kPointToPointSequenceBit = 1u << 18;
constexpr uint32_t kSequenceCounterMask = kPointToPointSequenceBit - 1;

constexpr uint32_t collective_sequence(uint64_t counter) {
  return static_cast<uint32_t>(counter) & kSequenceCounterMask;
}

constexpr uint32_t point_to_point_sequence(uint64_t counter) {
  return kPointToPointSequenceBit | (static_cast<uint32_t>(counter) & kSequenceCounterMask);
}

}  // namespace terse
