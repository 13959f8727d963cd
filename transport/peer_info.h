// What each rank contributes to the bootstrap table: its host identity (to group ranks by host),
// its UCX worker address (to create endpoints to it) and its process identity (to notice that a
// peer on this host died, which shared memory does not report).
//
//   host identity bytes u32 | host identity | worker address bytes u32 | worker address |
//   process space bytes u32 | process space | pid u32 | process start time u64
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/process_identity.h"

namespace terse {

struct PeerInfo {
  std::string host_identity;
  std::vector<uint8_t> worker_address;
  ProcessIdentity process;
};

std::vector<uint8_t> encode_peer_info(const PeerInfo& info);
// ncclRemoteError naming `rank` when the bytes are not exactly one well-formed PeerInfo.
ncclResult_t decode_peer_info(const std::vector<uint8_t>& bytes, int rank, PeerInfo* info);

}  // namespace terse
