// Transport::barrier and Transport::allgather: the control collectives, tagged with the control
// bit and their own sequence so they never match a data operation's messages.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {

Result Transport::barrier() {
  const uint32_t sequence = control_sequence_++;
  Deadline deadline = default_deadline();
  // Empty messages still need a valid address on some UCX paths.
  char token = 0, landing = 0;
  // Dissemination: in round k every rank signals rank + 2^k and hears from rank - 2^k; after
  // ceil(log2 n) rounds each rank has (transitively) heard from all.
  uint32_t round = 0;
  for (int distance = 1; distance < nranks_; distance *= 2, ++round) {
    uint32_t operation = make_control_operation(sequence, round);
    TransferRequest requests[2];
    TERSE_CHECK(
        post_recv((rank_ - distance + nranks_) % nranks_, operation, &landing, 0, &requests[0]));
    TERSE_CHECK(post_send((rank_ + distance) % nranks_, operation, &token, 0, &requests[1]));
    TERSE_CHECK(wait(requests, 2, deadline));
  }
  return Result::kSuccess;
}

Result Transport::allgather(const void* mine, size_t bytes, void* all) {
  if (bytes > 0 && (mine == nullptr || all == nullptr)) {
    return fail(Result::kInvalidArgument, "allgather of %zu bytes got a NULL buffer", bytes);
  }
  const uint32_t sequence = control_sequence_++;
  Deadline deadline = default_deadline();
  // Empty contributions still exchange (empty) messages, so the call stays a collective; they
  // point at a local byte rather than doing arithmetic on a possibly NULL `all`.
  char empty = 0;
  char* blocks = bytes > 0 ? static_cast<char*>(all) : &empty;
  if (bytes > 0 && blocks + rank_ * bytes != mine) memmove(blocks + rank_ * bytes, mine, bytes);
  // Ring: in step s a rank forwards the block it got in step s - 1 (its own first) to the right
  // and receives the next block from the left.
  const int right = (rank_ + 1) % nranks_;
  const int left = (rank_ - 1 + nranks_) % nranks_;
  for (int step = 0; step < nranks_ - 1; ++step) {
    const int send_block = (rank_ - step + nranks_) % nranks_;
    const int recv_block = (rank_ - step - 1 + nranks_) % nranks_;
    uint32_t operation = make_control_operation(sequence, static_cast<uint32_t>(step));
    TransferRequest requests[2];
    TERSE_CHECK(post_recv(left, operation, blocks + recv_block * bytes, bytes, &requests[0]));
    TERSE_CHECK(post_send(right, operation, blocks + send_block * bytes, bytes, &requests[1]));
    Result result = wait(requests, 2, deadline);
    if (result != Result::kSuccess && result != Result::kInvalidUsage) return result;
    if (result == Result::kInvalidUsage || requests[0].received_bytes() != bytes) {
      return fail(Result::kInvalidUsage,
                  "rank %d: allgather: rank %d's block differs in size from this rank's %zu "
                  "bytes; every rank must pass the same size",
                  rank_, recv_block, bytes);
    }
  }
  return Result::kSuccess;
}

Result Transport::broadcast_among(const std::vector<int>& members, int root, void* data,
                                  size_t bytes) {
  if (bytes > 0 && data == nullptr) {
    return fail(Result::kInvalidArgument, "broadcast of %zu bytes got a NULL buffer", bytes);
  }
  if (std::find(members.begin(), members.end(), rank_) == members.end() ||
      std::find(members.begin(), members.end(), root) == members.end()) {
    return fail(Result::kInternalError,
                "rank %d: broadcast among ranks that leave out rank %d or %d", rank_, rank_, root);
  }
  const uint32_t operation = make_control_operation(control_sequence_++, 0);
  Deadline deadline = default_deadline();
  // Empty messages still need a valid address on some UCX paths.
  char empty = 0;
  char* buffer = bytes > 0 ? static_cast<char*>(data) : &empty;
  std::vector<TransferRequest> requests(rank_ == root ? members.size() - 1 : 1);
  if (rank_ != root) {
    TERSE_CHECK(post_recv(root, operation, buffer, bytes, &requests[0]));
  } else {
    // A send refused (a member known dead) still lets the ones posted finish before the error
    // returns: their requests point into this frame.
    size_t posted = 0;
    Result refused = Result::kSuccess;
    for (int member : members) {
      if (member == root || refused != Result::kSuccess) continue;
      refused = post_send(member, operation, buffer, bytes, &requests[posted]);
      if (refused == Result::kSuccess) ++posted;
    }
    if (refused != Result::kSuccess) {
      const std::string why = last_error();
      wait(requests.data(), posted, deadline);
      return fail(refused, "%s", why.c_str());
    }
  }
  if (requests.empty()) return Result::kSuccess;
  const Result result = wait(requests.data(), requests.size(), deadline);
  if (result != Result::kSuccess && result != Result::kInvalidUsage) return result;
  if (result == Result::kInvalidUsage || (rank_ != root && requests[0].received_bytes() != bytes)) {
    return fail(Result::kInvalidUsage,
                "rank %d: broadcast from rank %d: its message differs in size from this rank's "
                "%zu bytes",
                rank_, root, bytes);
  }
  return Result::kSuccess;
}

}  // namespace terse
