// The algorithms where every position encodes its whole contribution once
// (sparse_allgather.cpp, randomk_allreduce.cpp).
#include <algorithm>

#include "model_steps.h"

namespace terse {
namespace model {
namespace {

// Every position's whole-tensor message, its error in its residual, its state updated.
std::vector<std::vector<uint8_t>> encode_each(GroupCall& call) {
  std::vector<std::vector<uint8_t>> messages;
  for (int r = 0; r < call.size(); ++r) {
    std::vector<float>* residual = call.residuals[r];
    messages.push_back(encode(call, call.contributions[r].data(), call.count, 0,
                              residual == nullptr ? nullptr : residual->data(), call.states[r]));
  }
  return messages;
}

std::vector<std::vector<float>> decode_each(GroupCall& call,
                                            const std::vector<std::vector<uint8_t>>& messages) {
  std::vector<std::vector<float>> decoded;
  for (const std::vector<uint8_t>& message : messages) {
    decoded.emplace_back(call.count);
    decode(call, message, decoded.back().data(), call.count, false);
  }
  return decoded;
}

// SparCML's switch: dense when the direct allgatherv's busiest rank would move more than a
// dense ring, n * max_j max((n - 1) s_j, T - s_j) > 2 (n - 1) * 4 * count (s_j the message
// sizes, T their sum).
bool dense_union(const std::vector<uint64_t>& sizes, size_t count) {
  const uint64_t n = sizes.size();
  uint64_t total = 0, busiest = 0;
  for (uint64_t size : sizes) total += size;
  for (uint64_t size : sizes) busiest = std::max({busiest, (n - 1) * size, total - size});
  return n * busiest > 2 * (n - 1) * sizeof(float) * uint64_t{count};
}

// The chunks of the chunked way: C = min(64, ceil(count / (16 * max(1, piece_bytes / 4))))
// near-equal ones, or none when the call does not take it: the codec keeps a fixed fraction of
// every part, no position has codec state, warm-up is over, and messages of the most
// Codec::wire_bytes gives for each chunk, summed, would still be sparse on every position.
std::vector<Range> sparse_chunks(const GroupCall& call) {
  const Codec& codec = *call.codec;
  if (!codec.keeps_fraction() || call.warmup_progress != 1.0) return {};
  if (codec.stateful(call.count, DType::kFloat32, call.shape)) return {};
  for (CodecState* state : call.states) {
    if (state != nullptr) return {};
  }
  const size_t per_chunk = std::max<size_t>(1, call.piece_bytes / 4) * 16;
  const size_t chunks =
      std::max<size_t>(1, std::min<size_t>(64, (call.count + per_chunk - 1) / per_chunk));
  std::vector<Range> ranges;
  uint64_t most = 0;
  for (size_t c = 0; c < chunks; ++c) {
    ranges.push_back(near_equal(call.count, static_cast<int>(chunks), static_cast<int>(c)));
    most += codec.wire_bytes(ranges.back().count, DType::kFloat32, MatrixShape{});
  }
  if (dense_union(std::vector<uint64_t>(static_cast<size_t>(call.size()), most), call.count)) {
    return {};
  }
  return ranges;
}

// The chunked way: each position encodes each chunk as a tensor of its own (the seed of its
// offset, its error into that range of its residual); each chunk of the sum is the position-order
// scatter-add of the n messages of that chunk, the first decoded without accumulating.
GroupResult chunked_sparse_allgather(GroupCall& call, const std::vector<Range>& chunks) {
  GroupResult result;
  result.sum.assign(call.count, 0.0f);
  for (const Range& chunk : chunks) {
    for (int r = 0; r < call.size(); ++r) {
      std::vector<float>* residual = call.residuals[static_cast<size_t>(r)];
      const std::vector<uint8_t> message = encode(
          call, call.contributions[static_cast<size_t>(r)].data() + chunk.offset, chunk.count,
          chunk.offset, residual == nullptr ? nullptr : residual->data() + chunk.offset, nullptr);
      decode(call, message, result.sum.data() + chunk.offset, chunk.count, r > 0);
    }
  }
  return result;
}

}  // namespace

// Chunked when sparse_chunks() says so. Otherwise whole: every position encodes its whole
// contribution; sparse unless dense_union() of the messages' sizes, and then every position
// decodes the n messages in position order, adding, bit for bit. Dense otherwise: each decodes
// its own and an exact ring sums them (another order).
GroupResult model_sparse_allgather(GroupCall& call) {
  const std::vector<Range> chunks = sparse_chunks(call);
  if (!chunks.empty()) return chunked_sparse_allgather(call, chunks);
  const std::vector<std::vector<uint8_t>> messages = encode_each(call);
  std::vector<uint64_t> sizes;
  for (const auto& message : messages) sizes.push_back(message.size());
  const bool dense = dense_union(sizes, call.count);
  if (dense) return position_order_sum(decode_each(call, messages));
  GroupResult result;
  result.sum.assign(call.count, 0.0f);
  for (size_t r = 0; r < messages.size(); ++r) {
    decode(call, messages[r], result.sum.data(), call.count, r > 0);
  }
  return result;
}

// Every position draws the same k positions from the call's seed; the sum of the decodes is the
// result (the algorithm sums the k values exactly, then decodes once: another order of the same
// additions, and the unbiased scaling applied once to the sum).
GroupResult model_randomk(GroupCall& call) {
  return position_order_sum(decode_each(call, encode_each(call)));
}

}  // namespace model
}  // namespace terse
