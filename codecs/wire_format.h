// Every codec message starts with this header, so a message describes itself: a receiver can
// check that it holds what it expects before it touches the payload. The payload layout after
// the header belongs to each codec and is documented in its file. Fields are little-endian (all
// targets terse builds for are); payloads start 8-byte aligned relative to the header.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codecs/codec.h"
#include "common/host_device.h"

namespace terse {

constexpr uint32_t kWireMagic = 0x45535254u;  // "TRSE" in memory order
constexpr uint8_t kWireVersion = 1;

struct WireHeader {
  uint32_t magic = kWireMagic;
  uint8_t version = kWireVersion;
  uint8_t codec = 0;    // CodecId
  uint8_t dtype = 0;    // DType of the encoder's input (informational)
  uint8_t flags = 0;    // codec-specific bits
  uint64_t count = 0;   // elements described by the message
  uint32_t param0 = 0;  // codec-specific (block size, k, rank, ...)
  uint32_t param1 = 0;  // codec-specific
  uint64_t seed = 0;    // codec-specific (random selection seed, ...)
};
static_assert(sizeof(WireHeader) == 32, "the wire header is 32 bytes");

// The one flag bit every codec shares: an escape section of non-finite elements follows the
// codec's bytes (nonfinite_escapes.h). Codecs' own flags use the other seven bits; read_header
// hides this one from them, since Codec::decode strips the section before they see the message.
constexpr uint8_t kWireEscapesFlag = 0x80;
static_assert(offsetof(WireHeader, count) == 8 && offsetof(WireHeader, seed) == 24,
              "wire header layout is part of the format");

constexpr size_t kWireHeaderBytes = sizeof(WireHeader);

TERSE_HD WireHeader make_header(CodecId codec, DType dtype, size_t count) {
  WireHeader header;
  header.codec = static_cast<uint8_t>(codec);
  header.dtype = static_cast<uint8_t>(dtype);
  header.count = count;
  return header;
}

// Reads and validates the header of `message` for a decode of `count` elements by `codec`:
// long enough, magic, version, codec id, dtype, element count. For device messages the header is
// copied to the host first (ordered on `context.stream`). The returned flags never hold
// kWireEscapesFlag: Codec::decode strips an escape section, on the host or the device, before a
// codec reads the message.
ncclResult_t read_header(const void* message, size_t message_bytes, CodecId codec, size_t count,
                         const DecodeContext& context, WireHeader* header);

// Refuses an encode whose output buffer is too small, naming the codec and both sizes.
ncclResult_t check_capacity(const char* codec, size_t needed, size_t capacity);

// Refuses a message whose length differs from what its header implies.
ncclResult_t check_payload(const char* codec, size_t expected_bytes, size_t message_bytes);

// Writes the header at the start of a host message.
inline void write_header(void* message, const WireHeader& header) {
  memcpy(message, &header, sizeof(header));
}

// Writes the header of a device message (ordered on `stream`).
ncclResult_t write_header_device(void* message, const WireHeader& header, void* stream);

}  // namespace terse
