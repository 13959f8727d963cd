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

}  // namespace

// Sparse while the direct allgatherv's busiest rank moves no more than a dense ring:
// n * max_j max((n - 1) s_j, T - s_j) <= 2 (n - 1) * 4 * count (s_j the message sizes, T their
// sum); then every position decodes the n messages in position order, adding, bit for bit.
// Dense otherwise: each decodes its own and an exact ring sums them (another order).
GroupResult model_sparse_allgather(GroupCall& call) {
  const std::vector<std::vector<uint8_t>> messages = encode_each(call);
  const uint64_t n = static_cast<uint64_t>(call.size());
  uint64_t total = 0, busiest = 0;
  for (const auto& message : messages) total += message.size();
  for (const auto& message : messages) {
    busiest = std::max({busiest, (n - 1) * message.size(), total - message.size()});
  }
  const bool dense = n * busiest > 2 * (n - 1) * sizeof(float) * uint64_t{call.count};
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
