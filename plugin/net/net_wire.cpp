#include "plugin/net/net_wire.h"

#include "transport/wire_bytes.h"

namespace terse::net {

std::vector<uint8_t> encode_handshake(const Handshake& handshake) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(kHandshakeMagic);
  writer.u16(kWireVersion);
  writer.u64(handshake.nonce);
  writer.u32(static_cast<uint32_t>(handshake.host.size()));
  writer.bytes(handshake.host.data(), handshake.host.size());
  writer.u32(static_cast<uint32_t>(handshake.worker_address.size()));
  writer.bytes(handshake.worker_address.data(), handshake.worker_address.size());
  writer.u32(handshake.framed ? 1 : 0);
  writer.u64(handshake.eager_bytes);
  return bytes;
}

bool decode_handshake(const std::vector<uint8_t>& bytes, Handshake* out) {
  ByteReader reader(bytes.data(), bytes.size());
  uint32_t magic = 0, host_length = 0, address_length = 0, framed = 0;
  uint16_t version = 0;
  const uint8_t* host = nullptr;
  const uint8_t* address = nullptr;
  if (!reader.u32(&magic) || magic != kHandshakeMagic || !reader.u16(&version) ||
      version != kWireVersion || !reader.u64(&out->nonce) || !reader.u32(&host_length) ||
      !reader.bytes(host_length, &host) || !reader.u32(&address_length) ||
      !reader.bytes(address_length, &address) || !reader.u32(&framed) || framed > 1 ||
      !reader.u64(&out->eager_bytes) || reader.remaining() != 0) {
    return false;
  }
  out->host.assign(reinterpret_cast<const char*>(host), host_length);
  out->worker_address.assign(address, address + address_length);
  out->framed = framed != 0;
  return true;
}

}  // namespace terse::net
