// Scenario "split": Communicator::split (ncclCommSplit) with ranks as processes.
//  1. Colors by parity, keys reversing the order; with 3 or more ranks the last rank passes
//     NCCL_SPLIT_NOCOLOR and gets no communicator. Each child must have the size and rank the
//     colors and keys give, and gathers its members' parent ranks in its own rank order and
//     sums them.
//  2. The parent keeps working while the children exist: a broadcast from the rank left out.
//  3. A child splits again with one color and equal keys (ties keep the child's order) and the
//     grandchild sums the parent ranks too.
//  4. Grandchildren, then children, are closed, all members at once.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "rank_process_protocol.h"
#include "rank_scenarios.h"

namespace terse {
namespace test {
namespace {

CollectiveArgs int32_call(CollectiveKind kind, const int32_t* send, int32_t* recv, size_t count) {
  CollectiveArgs args;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.type = ncclInt32;
  return args;
}

// The parent ranks sharing `rank`'s color, in the order of their keys (-rank: descending).
std::vector<int32_t> members_of(int rank, int nranks, int left_out) {
  std::vector<int32_t> members;
  for (int r = nranks - 1; r >= 0; --r) {
    if (r != left_out && r % 2 == rank % 2) members.push_back(r);
  }
  return members;
}

// Checks `child` against `members` (parent ranks in child rank order): its size, this rank's
// place, an allgather of the parent ranks and their sum by allreduce. "" when all is right.
std::string check_child(Communicator& child, int parent_rank, const std::vector<int32_t>& members) {
  const size_t size = members.size();
  const int expected_rank =
      static_cast<int>(std::find(members.begin(), members.end(), parent_rank) - members.begin());
  if (child.nranks() != static_cast<int>(size) || child.rank() != expected_rank) {
    return "the child is rank " + std::to_string(child.rank()) + " of " +
           std::to_string(child.nranks()) + ", expected rank " + std::to_string(expected_rank) +
           " of " + std::to_string(size);
  }
  const int32_t mine = parent_rank;
  std::vector<int32_t> gathered(size, -1);
  if (child.run(int32_call(CollectiveKind::kAllGather, &mine, gathered.data(), 1)) != ncclSuccess) {
    return std::string("allgather on the child failed: ") + last_error();
  }
  if (gathered != members) return "allgather on the child gathered other ranks or order";
  int32_t sum = -1, expected_sum = 0;
  for (int32_t member : members) expected_sum += member;
  if (child.run(int32_call(CollectiveKind::kAllReduce, &mine, &sum, 1)) != ncclSuccess) {
    return std::string("allreduce on the child failed: ") + last_error();
  }
  if (sum != expected_sum) {
    return "allreduce on the child gave " + std::to_string(sum) + ", expected " +
           std::to_string(expected_sum);
  }
  return "";
}

}  // namespace

int run_split(Communicator& comm) {
  const int rank = comm.rank(), n = comm.nranks();
  const int left_out = n >= 3 ? n - 1 : -1;
  const int color = rank == left_out ? NCCL_SPLIT_NOCOLOR : rank % 2;
  std::unique_ptr<Communicator> child;
  if (comm.split(color, -rank, &child) != ncclSuccess) {
    return report(kRankExchangeFailed, rank, std::string("split failed: ") + last_error());
  }
  if ((child == nullptr) != (rank == left_out)) {
    return report(kRankExchangeFailed, rank,
                  rank == left_out ? "NCCL_SPLIT_NOCOLOR still gave a communicator"
                                   : "no communicator for color " + std::to_string(color));
  }
  const std::vector<int32_t> members = members_of(rank, n, left_out);
  if (child != nullptr) {
    const std::string problem = check_child(*child, rank, members);
    if (!problem.empty()) return report(kRankExchangeFailed, rank, problem);
  }

  const int root = left_out >= 0 ? left_out : 0;
  int32_t value = rank == root ? 4242 : -1;
  CollectiveArgs broadcast = int32_call(CollectiveKind::kBroadcast, &value, &value, 1);
  broadcast.root = root;
  if (comm.run(broadcast) != ncclSuccess || value != 4242) {
    return report(kRankExchangeFailed, rank,
                  "the parent's broadcast beside its children gave " + std::to_string(value) +
                      " (" + last_error() + ")");
  }

  if (child != nullptr) {
    std::unique_ptr<Communicator> grandchild;
    if (child->split(0, 0, &grandchild) != ncclSuccess || grandchild == nullptr) {
      return report(kRankExchangeFailed, rank,
                    std::string("splitting the child failed: ") + last_error());
    }
    const std::string problem = check_child(*grandchild, rank, members);
    if (!problem.empty()) return report(kRankExchangeFailed, rank, "grandchild: " + problem);
    grandchild.reset();
    child.reset();
  }
  return kRankOk;
}

}  // namespace test
}  // namespace terse
