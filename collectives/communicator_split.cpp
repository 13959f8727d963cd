// ncclCommSplit and ncclCommShrink (communicator.h): a new communicator from some of this one's
// ranks, its bootstrap id started by one of them and sent to the rest over this one's transport.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {

ncclResult_t Communicator::split(int color, int key, std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "split: newcomm pointer is NULL");
  out->reset();
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return fail(ncclInvalidArgument, "split: color %d is negative and not NCCL_SPLIT_NOCOLOR (%d)",
                color, NCCL_SPLIT_NOCOLOR);
  }
  std::lock_guard<std::mutex> lock(call_mutex_);
  TERSE_CHECK(check_manageable("split", /*broken_ok=*/false));

  struct Choice {
    int32_t color;
    int32_t key;
  };
  const Choice mine{color, key};
  std::vector<Choice> choices(static_cast<size_t>(nranks_));
  ncclResult_t result = transport_->allgather(&mine, sizeof(mine), choices.data());
  if (result != ncclSuccess) {
    break_with(result);
    return result;
  }
  // The ranks of this color in their new order: by key, ties by rank.
  std::vector<int> members;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (color != NCCL_SPLIT_NOCOLOR && choices[static_cast<size_t>(rank)].color == color) {
      members.push_back(rank);
    }
  }
  const bool creates_root = !members.empty() && members.front() == rank_;
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return choices[static_cast<size_t>(a)].key < choices[static_cast<size_t>(b)].key;
  });

  // The lowest rank of each color starts the bootstrap root; every rank takes part in the
  // exchange of ids, contributing zeros unless it created one (or failed to).
  UniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclResult_t created = ncclSuccess;
  std::string creation_error;
  if (creates_root) {
    created = create_unique_id_with_own_root(&id);
    if (created != ncclSuccess) {
      creation_error = last_error();
      std::memset(&id, 0, sizeof(id));
    }
  }
  std::vector<UniqueId> ids(static_cast<size_t>(nranks_));
  result = transport_->allgather(&id, sizeof(id), ids.data());
  if (result != ncclSuccess) {
    break_with(result);
    return result;
  }
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  if (created != ncclSuccess) return fail(created, "split: %s", creation_error.c_str());

  const int creator = *std::min_element(members.begin(), members.end());
  const UniqueId& new_id = ids[static_cast<size_t>(creator)];
  const UniqueId zero_id{};
  if (std::memcmp(&new_id, &zero_id, sizeof(UniqueId)) == 0) {
    return fail(ncclSystemError,
                "split: rank %d, which starts the bootstrap of color %d, could not (see its log)",
                creator, color);
  }
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  TERSE_INFO("split: rank %d becomes rank %d of %zu (color %d, key %d)", rank_, new_rank,
             members.size(), color, key);
  return Communicator::create(new_id, new_rank, static_cast<int>(members.size()), cuda_device_,
                              out);
}

ncclResult_t Communicator::shrink(const std::vector<int>& excluded, bool abort_first,
                                  std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "shrink: newcomm pointer is NULL");
  out->reset();
  std::vector<bool> leaves(static_cast<size_t>(nranks_), false);
  for (int rank : excluded) {
    if (rank < 0 || rank >= nranks_) {
      return fail(ncclInvalidArgument,
                  "shrink: excludeRanksList holds rank %d, outside a communicator of %d ranks",
                  rank, nranks_);
    }
    if (leaves[static_cast<size_t>(rank)]) {
      return fail(ncclInvalidArgument, "shrink: excludeRanksList holds rank %d twice", rank);
    }
    if (rank == rank_) {
      return fail(ncclInvalidArgument,
                  "shrink: excludeRanksList holds rank %d, the caller: excluded ranks do not "
                  "call ncclCommShrink",
                  rank);
    }
    leaves[static_cast<size_t>(rank)] = true;
  }
  if (abort_first) TERSE_CHECK(revoke());
  std::lock_guard<std::mutex> lock(call_mutex_);
  TERSE_CHECK(check_manageable("shrink", /*broken_ok=*/true));
  std::vector<int> members;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (!leaves[static_cast<size_t>(rank)]) members.push_back(rank);
  }
  const int leader = members.front();
  UniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == leader && create_unique_id_with_own_root(&id) != ncclSuccess) {
    // The others still wait for an id: an empty one tells them this rank could not.
    TERSE_WARN("shrink: rank %d could not start the bootstrap root: %s", rank_, last_error());
  }
  TERSE_CHECK(transport_->broadcast_among(members, leader, &id, sizeof(id)));
  const UniqueId zero_id{};
  if (std::memcmp(&id, &zero_id, sizeof(UniqueId)) == 0) {
    return fail(ncclSystemError,
                "shrink: rank %d, which starts the new communicator's bootstrap, could not (see "
                "its log)",
                leader);
  }
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  TERSE_INFO("shrink: rank %d becomes rank %d of %zu (%zu ranks excluded)", rank_, new_rank,
             members.size(), excluded.size());
  return Communicator::create(id, new_rank, static_cast<int>(members.size()), cuda_device_, out);
}

}  // namespace terse
