#include "collectives/compressed/group_allgatherv.h"

#include <algorithm>
#include <cstring>

#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

size_t slot(int position) {
  return static_cast<size_t>(position);
}

}  // namespace

ncclResult_t exchange_sizes(const CompressedContext& context, uint32_t first_step,
                            uint64_t own_bytes, uint64_t* sizes) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  const uint32_t operation = make_operation(context.sequence, context.first_step + first_step);
  std::fill(sizes, sizes + slot(n), uint64_t{0});
  sizes[slot(group.index)] = own_bytes;
  // Slots: sends 0..n-1, receives n..2n-1, by peer position.
  InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline,
                              context.scratch->transfer_slots());
  for (int j = 0; j < n; ++j) {
    if (j == group.index) continue;
    TERSE_CHECK(transfers.recv(slot(n + j), group.rank_at(j), operation, &sizes[slot(j)],
                               sizeof(uint64_t)));
  }
  for (int k = 1; k < n; ++k) {
    const int j = (group.index + k) % n;
    TERSE_CHECK(transfers.send(slot(j), group.rank_at(j), operation, &sizes[slot(group.index)],
                               sizeof(uint64_t)));
    count_sent(context, sizeof(uint64_t));
  }
  return transfers.wait_all();
}

ncclResult_t gather_blocks(const CompressedContext& context, uint32_t first_step,
                           const std::vector<uint64_t>& sizes, const void* own,
                           std::vector<std::vector<uint8_t>>* blocks) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  const uint32_t operation = make_operation(context.sequence, context.first_step + first_step + 1);
  blocks->assign(slot(n), {});
  for (int j = 0; j < n; ++j) (*blocks)[slot(j)].resize(sizes[slot(j)]);
  std::memcpy((*blocks)[slot(group.index)].data(), own, sizes[slot(group.index)]);
  InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline);
  for (int j = 0; j < n; ++j) {
    if (j == group.index || sizes[slot(j)] == 0) continue;
    TERSE_CHECK(transfers.recv(slot(n + j), group.rank_at(j), operation, (*blocks)[slot(j)].data(),
                               sizes[slot(j)]));
  }
  const uint64_t own_bytes = sizes[slot(group.index)];
  for (int k = 1; k < n && own_bytes > 0; ++k) {
    const int j = (group.index + k) % n;
    TERSE_CHECK(transfers.send(slot(j), group.rank_at(j), operation, own, own_bytes));
    count_sent(context, own_bytes);
  }
  return transfers.wait_all();
}

}  // namespace terse
