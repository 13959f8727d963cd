// The collectives' traits (collective_traits.h).
#include "collectives/collective_traits.h"

namespace terse {

bool is_point_to_point(CollectiveKind kind) {
  return kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
}

bool has_root(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce ||
         kind == CollectiveKind::kGather || kind == CollectiveKind::kScatter;
}

size_t blocks_per_buffer(CollectiveKind kind, int nranks) {
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter:
      return static_cast<size_t>(nranks);
    default:
      return 1;
  }
}

void buffers_used(const CollectiveArgs& args, int rank, bool* send, bool* recv) {
  const bool root = rank == args.root;
  switch (args.kind) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kScatter:
      *send = root;
      *recv = true;
      return;
    case CollectiveKind::kReduce:
    case CollectiveKind::kGather:
      *send = true;
      *recv = root;
      return;
    case CollectiveKind::kSend:
      *send = true;
      *recv = false;
      return;
    case CollectiveKind::kRecv:
      *send = false;
      *recv = true;
      return;
    default:
      *send = *recv = true;
      return;
  }
}

}  // namespace terse
