#include "transport/bootstrap_messages.h"

#include "transport/wire_bytes.h"

namespace terse {

std::vector<uint8_t> encode_hello(const BootstrapHello& hello) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(hello.magic);
  writer.u16(hello.version);
  writer.u16(0);
  writer.u64(hello.secret);
  writer.u32(hello.rank);
  writer.u32(hello.nranks);
  writer.u32(hello.payload_bytes);
  writer.u32(0);
  return bytes;
}

BootstrapHello decode_hello(const uint8_t* bytes) {
  BootstrapHello hello;
  ByteReader reader(bytes, kBootstrapHelloBytes);
  uint16_t reserved16 = 0;
  uint32_t reserved32 = 0;
  reader.u32(&hello.magic);
  reader.u16(&hello.version);
  reader.u16(&reserved16);
  reader.u64(&hello.secret);
  reader.u32(&hello.rank);
  reader.u32(&hello.nranks);
  reader.u32(&hello.payload_bytes);
  reader.u32(&reserved32);
  return hello;
}

std::vector<uint8_t> encode_reply_header(const BootstrapReplyHeader& header) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(&bytes);
  writer.u32(header.magic);
  writer.u32(static_cast<uint32_t>(header.status));
  writer.u64(header.body_bytes);
  return bytes;
}

BootstrapReplyHeader decode_reply_header(const uint8_t* bytes) {
  BootstrapReplyHeader header;
  ByteReader reader(bytes, kBootstrapReplyHeaderBytes);
  uint32_t status = 0;
  reader.u32(&header.magic);
  reader.u32(&status);
  reader.u64(&header.body_bytes);
  header.status = static_cast<ncclResult_t>(status);
  return header;
}

std::vector<uint8_t> encode_payload_table(const std::vector<std::vector<uint8_t>>& payloads) {
  std::vector<uint8_t> body;
  ByteWriter writer(&body);
  for (const std::vector<uint8_t>& payload : payloads) {
    writer.u32(static_cast<uint32_t>(payload.size()));
    writer.bytes(payload.data(), payload.size());
  }
  return body;
}

bool decode_payload_table(const std::vector<uint8_t>& body, int nranks,
                          std::vector<std::vector<uint8_t>>* payloads) {
  ByteReader reader(body.data(), body.size());
  payloads->assign(nranks, {});
  for (int rank = 0; rank < nranks; ++rank) {
    uint32_t size = 0;
    const uint8_t* data = nullptr;
    if (!reader.u32(&size) || size > kMaxBootstrapPayloadBytes || !reader.bytes(size, &data)) {
      return false;
    }
    (*payloads)[rank].assign(data, data + size);
  }
  return reader.remaining() == 0;
}

}  // namespace terse
