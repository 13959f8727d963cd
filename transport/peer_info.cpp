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
  writer.u32(static_cast<uint32_t>(info.local_worker_address.size()));
  writer.bytes(info.local_worker_address.data(), info.local_worker_address.size());
  writer.u32(static_cast<uint32_t>(info.process.process_space.size()));
  writer.bytes(info.process.process_space.data(), info.process.process_space.size());
  writer.u32(static_cast<uint32_t>(info.process.pid));
  writer.u64(info.process.start_time);
  return bytes;
}

Result decode_peer_info(const std::vector<uint8_t>& bytes, int rank, PeerInfo* info) {
  ByteReader reader(bytes.data(), bytes.size());
  uint32_t host_bytes = 0, address_bytes = 0, local_bytes = 0, space_bytes = 0, pid = 0;
  uint64_t start_time = 0;
  const uint8_t* host = nullptr;
  const uint8_t* address = nullptr;
  const uint8_t* local = nullptr;
  const uint8_t* space = nullptr;
  if (!reader.u32(&host_bytes) || !reader.bytes(host_bytes, &host) || !reader.u32(&address_bytes) ||
      !reader.bytes(address_bytes, &address) || !reader.u32(&local_bytes) ||
      !reader.bytes(local_bytes, &local) || !reader.u32(&space_bytes) ||
      !reader.bytes(space_bytes, &space) || !reader.u32(&pid) || !reader.u64(&start_time) ||
      reader.remaining() != 0 || address_bytes == 0) {
    return fail(Result::kRemoteError,
                "rank %d's entry in the bootstrap table (%zu bytes) is not a host identity, a "
                "UCX worker address and a process identity",
                rank, bytes.size());
  }
  info->host_identity.assign(reinterpret_cast<const char*>(host), host_bytes);
  info->worker_address.assign(address, address + address_bytes);
  info->local_worker_address.assign(local, local + local_bytes);
  info->process.process_space.assign(reinterpret_cast<const char*>(space), space_bytes);
  info->process.pid = static_cast<int32_t>(pid);
  info->process.start_time = start_time;
  return Result::kSuccess;
}

}  // namespace terse
