#include "transport/peer_info.h"

#include "common/result.h"
#include "transport/wire_bytes.h"

namespace terse {

std::vector<uint8_t> encode_peer_info(const PeerInfo& info) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(static_cast<uint32_t>(info.host_identity.size()));
  writer.bytes(info.host_identity.data(), info.host_identity.size());
  writer.u32(static_cast<uint32_t>(info.worker_address.size()));
  writer.bytes(info.worker_address.data(), info.worker_address.size());
  return bytes;
}

ncclResult_t decode_peer_info(const std::vector<uint8_t>& bytes, int rank, PeerInfo* info) {
  ByteReader reader(bytes.data(), bytes.size());
  uint32_t host_bytes = 0, address_bytes = 0;
  const uint8_t* host = nullptr;
  const uint8_t* address = nullptr;
  if (!reader.u32(&host_bytes) || !reader.bytes(host_bytes, &host) || !reader.u32(&address_bytes) ||
      !reader.bytes(address_bytes, &address) || reader.remaining() != 0 || address_bytes == 0) {
    return fail(ncclRemoteError,
                "rank %d's entry in the bootstrap table (%zu bytes) is not a host identity and "
                "a UCX worker address",
                rank, bytes.size());
  }
  info->host_identity.assign(reinterpret_cast<const char*>(host), host_bytes);
  info->worker_address.assign(address, address + address_bytes);
  return ncclSuccess;
}

}  // namespace terse
