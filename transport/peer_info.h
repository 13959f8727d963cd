// What each rank contributes to the bootstrap table: its host identity (to group ranks by host),
// its UCX worker addresses (to create endpoints to it: the network worker, and the shared-memory
// worker for ranks on its host, empty when it has none) and its process identity (to notice that
// a peer on this host died, which shared memory does not report).
//
//   host identity bytes u32 | host identity | worker address bytes u32 | worker address |
//   local worker address bytes u32 | local worker address |
//   process space bytes u32 | process space | pid u32 | process start time u64
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/process_identity.h"

namespace terse {

struct PeerInfo {
  std::string host_identity;
  std::vector<uint8_t> worker_address;
  std::vector<uint8_t> local_worker_address;
  ProcessIdentity process;
};

std::vector<uint8_t> encode_peer_info(const PeerInfo& info);
// Result::kRemoteError naming `rank` when the bytes are not exactly one well-formed PeerInfo.
Result decode_peer_info(const std::vector<uint8_t>& bytes, int rank, PeerInfo* info);

}  // namespace terse
