// Rank arithmetic of a ring (pure, no communication; tests/collectives/test_ring_pattern.cpp).
//
// Ranks 0..n-1 sit on a ring in rank order: rank r sends to next() = r+1 and receives from
// previous() = r-1 (mod n). A buffer of `count` elements is cut into n near-equal blocks,
// block i being the one rank i owns at the end of a reduce-scatter:
//
//   count = 10, n = 4  ->  blocks {offset, count}: {0,3} {3,3} {6,2} {8,2}
//   (the first count % n blocks hold one element more)
//
// Reduce-scatter, n-1 steps: at step s rank r sends its partial sum of block r-s-1 to next()
// and receives block r-s-2 from previous(), adding its own contribution to it. At the last step
// (s = n-2) it receives block r, now complete. Allgather, n-1 steps: at step s rank r sends
// block r-s (its own at s = 0, then the block it received at s-1) and receives block r-s-1.
// A ring allreduce is the reduce-scatter followed by the allgather: each rank enters the
// allgather owning block r, exactly where the reduce-scatter left it.
//
//   n = 3, reduce-scatter          allgather
//   step 0: r0 sends b2, gets b1   r0 sends b0, gets b2
//           r1 sends b0, gets b2   r1 sends b1, gets b0
//           r2 sends b1, gets b0   r2 sends b2, gets b1
//   step 1: r0 sends b1, gets b0   r0 sends b2, gets b1
//
// Large blocks are further cut into pieces (pipeline_pieces) so several messages are in flight
// and temporary buffers stay bounded; every rank cuts a block the same way, so piece k of block
// b is the same element range on every rank.
#pragma once

#include <cstddef>

namespace terse {

// An element range [offset, offset + count) of a buffer.
struct ElementRange {
  size_t offset = 0;
  size_t count = 0;
  bool operator==(const ElementRange& other) const {
    return offset == other.offset && count == other.count;
  }
};

// Block `index` (0 <= index < parts) when `count` elements are cut into `parts` near-equal
// blocks in order; the first count % parts blocks hold one element more. Blocks may be empty
// when count < parts.
inline ElementRange near_equal_block(size_t count, int parts, int index) {
  const size_t n = static_cast<size_t>(parts), i = static_cast<size_t>(index);
  const size_t base = count / n, extra = count % n;
  return ElementRange{i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

// How many pieces of at most `max_piece` elements a range of `count` elements is cut into
// (at least 1, so that an empty range is still one, empty, message).
inline size_t pipeline_piece_count(size_t count, size_t max_piece) {
  if (max_piece == 0 || count <= max_piece) return 1;
  return (count + max_piece - 1) / max_piece;
}

// Piece `index` of `range` cut into pieces of `max_piece` elements (the last may be shorter).
inline ElementRange pipeline_piece(const ElementRange& range, size_t max_piece, size_t index) {
  if (max_piece == 0) return range;
  const size_t start = index * max_piece;
  if (start >= range.count) return ElementRange{range.offset + range.count, 0};
  const size_t left = range.count - start;
  return ElementRange{range.offset + start, left < max_piece ? left : max_piece};
}

// One rank's view of the ring.
class RingPattern {
 public:
  RingPattern(int rank, int nranks) : rank_(rank), nranks_(nranks) {}

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int next() const { return wrap(rank_ + 1); }
  int previous() const { return wrap(rank_ - 1); }
  // Steps of a ring reduce-scatter or allgather.
  int steps() const { return nranks_ - 1; }

  // The block this rank ends owning after a reduce-scatter (and starts with in an allgather).
  int owned_block() const { return rank_; }

  // Reduce-scatter, step 0 <= s < steps(): the block sent to next() (this rank's partial sum),
  // and the block received from previous() (to be combined with this rank's own contribution).
  int reduce_scatter_send_block(int step) const { return wrap(rank_ - step - 1); }
  int reduce_scatter_recv_block(int step) const { return wrap(rank_ - step - 2); }

  // Allgather, step 0 <= s < steps(): the block sent to next() and the block received.
  int allgather_send_block(int step) const { return wrap(rank_ - step); }
  int allgather_recv_block(int step) const { return wrap(rank_ - step - 1); }

  // Block `index` of a buffer of `count` elements (near_equal_block with nranks parts).
  ElementRange block(size_t count, int index) const {
    return near_equal_block(count, nranks_, index);
  }

 private:
  // Any int (also negative, down to -2 * nranks) onto 0..nranks-1.
  int wrap(int value) const { return ((value % nranks_) + nranks_) % nranks_; }

  int rank_;
  int nranks_;
};

}  // namespace terse
