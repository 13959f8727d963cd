#include "transport/unique_id.h"

#include <netinet/in.h>

#include <cstring>

#include "common/result.h"
#include "transport/wire_bytes.h"

namespace terse {
namespace {

constexpr char kMagic[4] = {'t', 'r', 's', 'e'};
constexpr uint16_t kVersion = 1;
constexpr uint8_t kFlagRootStartedByRankZero = 1;

}  // namespace

void encode_unique_id(const UniqueIdFields& fields, UniqueId* id) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.bytes(kMagic, sizeof(kMagic));
  writer.u16(kVersion);
  writer.u8(fields.root_started_by_rank_zero ? kFlagRootStartedByRankZero : 0);
  uint8_t address[16] = {};
  uint32_t scope_id = 0;
  if (fields.root.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(fields.root.get());
    memcpy(address, &v6->sin6_addr, 16);
    scope_id = v6->sin6_scope_id;
    writer.u8(6);
  } else {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(fields.root.get());
    memcpy(address, &v4->sin_addr, 4);
    writer.u8(4);
  }
  writer.u16(fields.root.port());
  writer.u16(0);
  writer.u32(scope_id);
  writer.bytes(address, sizeof(address));
  writer.u64(fields.secret);
  bytes.resize(kUniqueIdBytes, 0);
  memcpy(id->internal, bytes.data(), kUniqueIdBytes);
}

Result decode_unique_id(const UniqueId& id, UniqueIdFields* fields) {
  ByteReader reader(id.internal, kUniqueIdBytes);
  const uint8_t* magic = nullptr;
  uint16_t version = 0, port = 0, zero = 0;
  uint8_t flags = 0, family = 0;
  uint32_t scope_id = 0;
  const uint8_t* address = nullptr;
  uint64_t secret = 0;
  reader.bytes(sizeof(kMagic), &magic);
  reader.u16(&version);
  reader.u8(&flags);
  reader.u8(&family);
  reader.u16(&port);
  reader.u16(&zero);
  reader.u32(&scope_id);
  reader.bytes(16, &address);
  reader.u64(&secret);
  if (memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return fail(Result::kInvalidArgument,
                "unique id starts with bytes %02x %02x %02x %02x, not terse's magic \"trse\"; "
                "was it made by terse's ncclGetUniqueId and passed to every rank intact?",
                magic[0], magic[1], magic[2], magic[3]);
  }
  if (version != kVersion) {
    return fail(Result::kInvalidArgument,
                "unique id has format version %u but this terse reads version %u; do all ranks "
                "run the same terse build?",
                version, kVersion);
  }
  if ((family != 4 && family != 6) || port == 0) {
    return fail(Result::kInvalidArgument,
                "unique id names address family %u and port %u; expected family 4 or 6 and a "
                "non-zero port",
                family, port);
  }
  if (family == 4) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    memcpy(&v4.sin_addr, address, 4);
    fields->root = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  } else {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    memcpy(&v6.sin6_addr, address, 16);
    v6.sin6_scope_id = scope_id;
    fields->root = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  }
  fields->root.set_port(port);
  fields->secret = secret;
  fields->root_started_by_rank_zero = (flags & kFlagRootStartedByRankZero) != 0;
  return Result::kSuccess;
}

uint16_t communicator_tag_id(uint64_t secret) {
  return static_cast<uint16_t>(secret ^ (secret >> 16) ^ (secret >> 32) ^ (secret >> 48));
}

}  // namespace terse
