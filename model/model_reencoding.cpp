// The algorithms that decode, add and re-encode (compressed_sra.cpp, compressed_ring.cpp,
// compressed_recursive_doubling.cpp, compressed_tree.cpp), replayed position by position from
// their documented order: results must match them bit for bit.
#include <algorithm>

#include "model_steps.h"

namespace terse {
namespace model {
namespace {

float* at(std::vector<float>* values, size_t offset) {
  return values == nullptr ? nullptr : values->data() + offset;
}

// Elements per pipeline piece: piece_bytes of fp32, more when a range of `largest` elements would
// need more than `most_pieces` pieces.
size_t piece_elements(const GroupCall& call, size_t largest, size_t most_pieces) {
  const size_t requested = std::max<size_t>(1, call.piece_bytes / sizeof(float));
  return std::max(requested, (largest + most_pieces - 1) / most_pieces);
}

}  // namespace

// Chunk j (near-equal over n) belongs to position j. Chunks are cut into pieces of
// max(piece_bytes / 4, ceil(chunk 0 / 64)) elements, the same number for every chunk. For each
// piece: every position encodes its contribution's range (error into its residual); the owner
// adds the n decodes in position order, adds its owner residual, re-encodes (error into the owner
// residual); everyone decodes that.
GroupResult model_sra(GroupCall& call) {
  const int n = call.size();
  GroupResult result;
  result.sum.assign(call.count, 0.0f);
  const size_t largest = near_equal(call.count, n, 0).count;
  const size_t piece = piece_elements(call, largest, 64);
  const size_t pieces = piece_count(largest, piece);
  for (int owner = 0; owner < n; ++owner) {
    const Range chunk = near_equal(call.count, n, owner);
    for (size_t k = 0; k < pieces; ++k) {
      const Range range = piece_of(chunk, piece, k);
      if (range.count == 0) continue;
      std::vector<float> sum(range.count);
      for (int r = 0; r < n; ++r) {
        const std::vector<uint8_t> message =
            encode(call, call.contributions[r].data() + range.offset, range.count, range.offset,
                   at(call.residuals[r], range.offset), nullptr);
        decode(call, message, sum.data(), range.count, r > 0);
      }
      float* owner_residual = at(call.owner_residuals[owner], range.offset - chunk.offset);
      if (owner_residual != nullptr) {
        for (size_t i = 0; i < range.count; ++i) sum[i] += owner_residual[i];
      }
      const std::vector<uint8_t> reencoded =
          encode(call, sum.data(), range.count, range.offset, owner_residual, nullptr);
      decode(call, reencoded, result.sum.data() + range.offset, range.count, false);
    }
  }
  return result;
}

// Block b (near-equal over n) is first encoded by position b + 1 from its contribution, then at
// each of the next positions decoded, added to that position's contribution and re-encoded,
// ending with its owner b; every encode's error goes into the encoding position's residual.
// Blocks are cut into pieces of max(piece_bytes / 4, ceil(block 0 / (4000 / (2 (n - 1)))))
// elements.
GroupResult model_ring(GroupCall& call) {
  const int n = call.size();
  GroupResult result;
  result.sum.assign(call.count, 0.0f);
  const size_t largest = near_equal(call.count, n, 0).count;
  const size_t most_pieces = std::max<size_t>(1, 4000 / (2 * static_cast<size_t>(n - 1)));
  const size_t piece = piece_elements(call, largest, most_pieces);
  const size_t pieces = piece_count(largest, piece);
  for (int b = 0; b < n; ++b) {
    const Range block = near_equal(call.count, n, b);
    for (size_t k = 0; k < pieces; ++k) {
      const Range range = piece_of(block, piece, k);
      if (range.count == 0) continue;
      const int first = (b + 1) % n;
      std::vector<uint8_t> message =
          encode(call, call.contributions[first].data() + range.offset, range.count, range.offset,
                 at(call.residuals[first], range.offset), nullptr);
      std::vector<float> partial(range.count);
      for (int t = 2; t <= n; ++t) {
        const int q = (b + t) % n;
        decode(call, message, partial.data(), range.count, false);
        const float* own = call.contributions[q].data() + range.offset;
        for (size_t i = 0; i < range.count; ++i) partial[i] += own[i];
        message = encode(call, partial.data(), range.count, range.offset,
                         at(call.residuals[q], range.offset), nullptr);
      }
      decode(call, message, result.sum.data() + range.offset, range.count, false);
    }
  }
  return result;
}

// p = the largest power of two <= n. Positions p + i fold into i (their encode decoded and added
// to i's contribution); round 0 encodes every contribution (error into the residual), round k
// each running value; running = decode(lower partner's) + decode(higher's). The error of a
// round-k >= 1 encode is added to the residual of the position whose lowest set bit is
// 2^(k - 1); with folds, an unfold encode of the final value (its error to position p/2) is
// what everyone decodes.
GroupResult model_recursive_doubling(GroupCall& call) {
  const int n = call.size();
  int p = 1, rounds = 0;
  while (p * 2 <= n) p *= 2;
  while ((1 << rounds) < p) ++rounds;
  const int extra = n - p;
  const size_t count = call.count;
  const auto kept_stage = [&](int position) {
    if (position == 0 || position >= p) return 0;
    int stage = 1;
    while (((position >> (stage - 1)) & 1) == 0) ++stage;
    return stage < rounds || extra > 0 ? stage : 0;
  };
  const auto keep = [&](int position, const std::vector<float>& error) {
    std::vector<float>* residual = call.residuals[position];
    for (size_t i = 0; i < count; ++i) (*residual)[i] += error[i];
  };
  std::vector<std::vector<float>> values(call.contributions.begin(),
                                         call.contributions.begin() + p);
  for (int i = 0; i < extra; ++i) {
    const std::vector<uint8_t> folded = encode(call, call.contributions[p + i].data(), count, 0,
                                               at(call.residuals[p + i], 0), nullptr);
    decode(call, folded, values[i].data(), count, true);
  }
  std::vector<std::vector<uint8_t>> messages(p);
  for (int i = 0; i < p; ++i) {
    messages[i] = encode(call, values[i].data(), count, 0, at(call.residuals[i], 0), nullptr);
  }
  std::vector<std::vector<float>> running(p, std::vector<float>(count));
  std::vector<float> error(count);
  for (int round = 0; round < rounds; ++round) {
    if (round > 0) {
      for (int i = 0; i < p; ++i) {
        const bool kept = call.residuals[i] != nullptr && kept_stage(i) == round;
        messages[i] =
            encode(call, running[i].data(), count, 0, kept ? error.data() : nullptr, nullptr);
        if (kept) keep(i, error);
      }
    }
    for (int i = 0; i < p; ++i) {
      const int lower = std::min(i, i ^ (1 << round)), higher = std::max(i, i ^ (1 << round));
      decode(call, messages[lower], running[i].data(), count, false);
      decode(call, messages[higher], running[i].data(), count, true);
    }
  }
  GroupResult result;
  result.sum = running[0];
  if (extra > 0) {
    for (int i = 0; i < p; ++i) {
      const bool kept = call.residuals[i] != nullptr && kept_stage(i) == rounds;
      const std::vector<uint8_t> final_message =
          encode(call, running[i].data(), count, 0, kept ? error.data() : nullptr, nullptr);
      if (kept) keep(i, error);
      if (i == 0) decode(call, final_message, result.sum.data(), count, false);
    }
  }
  return result;
}

// Heap order: position i's parent is (i - 1) / 2. A leaf encodes its contribution; an inner
// position adds its children's decodes (first child, then second) to its contribution and
// encodes that; the root's message is everyone's result. Every position's one encode error
// becomes its residual.
GroupResult model_tree(GroupCall& call) {
  const int n = call.size();
  const size_t count = call.count;
  std::vector<std::vector<uint8_t>> messages(n);
  for (int i = n - 1; i >= 0; --i) {
    std::vector<float> values = call.contributions[i];
    for (int child : {2 * i + 1, 2 * i + 2}) {
      if (child < n) decode(call, messages[child], values.data(), count, true);
    }
    messages[i] = encode(call, values.data(), count, 0, at(call.residuals[i], 0), nullptr);
  }
  GroupResult result;
  result.sum.assign(count, 0.0f);
  decode(call, messages[0], result.sum.data(), count, false);
  return result;
}

}  // namespace model
}  // namespace terse
