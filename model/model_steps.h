// The reference model's building blocks: one compressed allreduce over a group, written from the
// algorithms' documented contracts (collectives/compressed/*.cpp file comments) and nothing else
// of their code. The model encodes and decodes with the codec itself (codecs are tested on
// their own), and re-does everything around it: the chunking and pipeline pieces, the seed of
// each encode, the order in which decodes are added, where each encode's error goes.
//
// Where the algorithm's order of fp32 additions is part of its contract (every re-encoding
// algorithm, sparse allgather's scatter-add), the model follows it and its result must match bit
// for bit. Where an exact sum is done by a ring the model does not replay (Random-K's k values,
// sparse allgather's dense switch, PowerSGD's factors), the model sums in position order and
// states a rounding tolerance per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/codec.h"

namespace terse {
namespace model {

// An element range [offset, offset + count).
struct Range {
  size_t offset = 0;
  size_t count = 0;
};

// Block `index` of `count` elements cut into `parts` near-equal blocks in order, the first
// count % parts one element longer (the algorithms' chunks and ring blocks).
Range near_equal(size_t count, int parts, int index);
// Pieces of at most `piece` elements a range of `longest` elements is cut into (at least 1).
size_t piece_count(size_t longest, size_t piece);
// Piece `k` of `range` (empty past its end).
Range piece_of(const Range& range, size_t piece, size_t k);
// The seed of an encode of the elements from `offset` on: the call's seed xor offset times the
// 64-bit golden ratio (the rule contribution.h states).
uint64_t seed_at(uint64_t call_seed, size_t offset);

// One call over a group, by group position.
struct GroupCall {
  Codec* codec = nullptr;
  uint64_t seed = 0;
  uint64_t step = 0;
  double warmup_progress = 1.0;
  MatrixShape shape;
  size_t count = 0;
  size_t piece_bytes = 0;
  // Each position's contribution in fp32: its input plus its residual.
  std::vector<std::vector<float>> contributions;
  // Where each position's encode error goes (null: the position keeps none).
  std::vector<std::vector<float>*> residuals;
  // Scatter-reduce-allgather's owner residual of each position's chunk (null: none).
  std::vector<std::vector<float>*> owner_residuals;
  // Each position's codec state (null: none).
  std::vector<CodecState*> states;
  // PowerSGD's warm-started Q, shared by all positions (null: no state).
  std::vector<float>* warm_q = nullptr;

  int size() const { return static_cast<int>(contributions.size()); }
};

// The group's result, unscaled fp32, and how far the code under test may be from it per element
// (empty: not at all, bit for bit).
struct GroupResult {
  std::vector<float> sum;
  std::vector<double> tolerance;
};

// Encodes `count` values at `values` (elements from `offset` on) with the seed of that offset;
// `error` (count floats) and `state` may be null.
std::vector<uint8_t> encode(const GroupCall& call, const float* values, size_t count, size_t offset,
                            float* error, CodecState* state);
// Decodes into `count` fp32 values at `out`, adding when `accumulate`.
void decode(const GroupCall& call, const std::vector<uint8_t>& message, float* out, size_t count,
            bool accumulate);

// Each algorithm as its file documents it.
GroupResult model_sra(GroupCall& call);
GroupResult model_ring(GroupCall& call);
GroupResult model_recursive_doubling(GroupCall& call);
GroupResult model_tree(GroupCall& call);
GroupResult model_sparse_allgather(GroupCall& call);
GroupResult model_randomk(GroupCall& call);
GroupResult model_powersgd(GroupCall& call);

// The sum over positions, in position order, and a tolerance for an exact sum done in another
// order: n ulps of the sum of magnitudes (non-finite elements must only match in kind).
GroupResult position_order_sum(const std::vector<std::vector<float>>& values);

}  // namespace model
}  // namespace terse
