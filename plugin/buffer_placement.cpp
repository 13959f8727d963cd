#include "plugin/buffer_placement.h"

#include "collectives/reduction.h"

namespace terse {

BuffersUsed buffers_used(CollectiveKind kind, int rank, int root) {
  const bool is_root = rank == root;
  switch (kind) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kScatter:
      return {is_root, true};
    case CollectiveKind::kReduce:
    case CollectiveKind::kGather:
      return {true, is_root};
    case CollectiveKind::kSend:
      return {true, false};
    case CollectiveKind::kRecv:
      return {false, true};
    default:
      return {true, true};
  }
}

BufferBytes buffer_bytes(const CollectiveArgs& args, int rank, int nranks) {
  const size_t block = args.count * nccl_type_size(args.type);
  const size_t all_blocks = block * static_cast<size_t>(nranks);
  size_t send = block, recv = block;
  switch (args.kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kGather:
      recv = all_blocks;
      break;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kScatter:
      send = all_blocks;
      break;
    case CollectiveKind::kAllToAll:
      send = recv = all_blocks;
      break;
    default:
      break;
  }
  const BuffersUsed used = buffers_used(args.kind, rank, args.root);
  if (args.count == 0) return {};
  return {used.send ? send : 0, used.recv ? recv : 0};
}

PathChoice choose_path(const BuffersUsed& used, const BufferMemory& send, const BufferMemory& recv,
                       int comm_device) {
  PathChoice choice;
  const BufferMemory* buffers[2] = {used.send ? &send : nullptr, used.recv ? &recv : nullptr};
  const char* names[2] = {"sendbuff", "recvbuff"};
  int host = -1, staged = -1;  // the first used buffer of each sort
  for (int i = 0; i < 2; ++i) {
    if (buffers[i] == nullptr) continue;
    if (buffers[i]->kind == BufferKind::kHost) {
      if (host < 0) host = i;
    } else if (staged < 0) {
      staged = i;
    }
  }
  if (staged < 0) return choice;  // host memory only, or nothing used
  if (host >= 0) {
    choice.refusal = PlacementRefusal::kMixed;
    choice.argument = names[host];
    return choice;
  }
  for (int i = 0; i < 2; ++i) {
    if (buffers[i] == nullptr) continue;
    if (comm_device < 0) {
      choice.refusal = PlacementRefusal::kNoDevice;
      choice.argument = names[i];
      return choice;
    }
    if (buffers[i]->kind == BufferKind::kDevice && buffers[i]->device != comm_device) {
      choice.refusal = PlacementRefusal::kOtherDevice;
      choice.argument = names[i];
      return choice;
    }
  }
  choice.path = CallPath::kDevice;
  return choice;
}

const char* buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::kHost:
      return "host memory";
    case BufferKind::kDevice:
      return "device memory";
    case BufferKind::kManaged:
      return "managed memory";
  }
  return "memory";
}

}  // namespace terse
