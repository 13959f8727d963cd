// The owner's clock waits (bounded staleness): a clock request is answered once the slowest
// rank's clock lets it through, and failed when a failed rank's clock holds it back for good.
#include "ps/ps_server.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace terse {

void PsServer::answer_clocks(PsTensor* tensor) {
  const uint64_t slowest = *std::min_element(tensor->clocks.begin(), tensor->clocks.end());
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    const PsRequestHeader& header = waiter->header;
    // Waits while the slowest is more than `staleness` steps behind (written so that no
    // staleness, UINT64_MAX included, overflows).
    if (header.tensor == tensor->id &&
        (header.clock <= slowest || header.clock - slowest <= header.staleness)) {
      reply(waiter->client, header, ncclSuccess, "");
      waiter = clock_waiters_.erase(waiter);
    } else {
      ++waiter;
    }
  }
}

void PsServer::fail_clocks_held_by_failed_ranks() {
  // A waiter whose client has given up (its deadline passed) goes: nobody waits for its answer.
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    waiter = waiter->deadline.expired() ? clock_waiters_.erase(waiter) : std::next(waiter);
  }
  std::vector<int> failed_ranks;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (rank != rank_ && transport_->peer_failed(rank)) failed_ranks.push_back(rank);
  }
  if (failed_ranks.empty()) return;
  peer_failed_ = true;
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    const PsRequestHeader& header = waiter->header;
    std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
    int culprit = -1;
    for (int rank : failed_ranks) {
      const uint64_t held = tensor != nullptr ? tensor->clocks[size_t(rank)] : 0;
      if (tensor != nullptr && header.clock > held && header.clock - held > header.staleness) {
        culprit = rank;
      }
    }
    if (culprit < 0) {
      ++waiter;
      continue;
    }
    reply(waiter->client, header, ncclRemoteError,
          "rank " + std::to_string(culprit) + " failed at clock " +
              std::to_string(tensor->clocks[size_t(culprit)]) + ", so clock " +
              std::to_string(header.clock) + " with staleness " + std::to_string(header.staleness) +
              " can never be reached");
    waiter = clock_waiters_.erase(waiter);
  }
}

}  // namespace terse
