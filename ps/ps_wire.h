// The parameter server's messages over its own transport (ps_server.h). A client's request to an
// owner is a fixed-size header, then (when the header says so) a payload of its own tag; the
// owner answers with one reply message: a fixed-size header and the payload (a receive's shard).
//
// Tags (tag_layout.h) carry the sender's rank, so an owner keeps one header receive posted per
// client and tells the payloads apart by the client's sequence number:
//   request header   make_operation(0, kHeaderStep)           one per client, in posting order
//   request payload  make_operation(sequence, kPayloadStep)
//   reply            make_operation(sequence, kReplyStep)
// UCX delivers equal tags from one sender in order, so a client's headers arrive as it sent them.
// The tag holds only the sequence's low bits (make_operation wraps it), so a payload starts with
// a PsPayloadPrefix that carries the whole sequence: an owner refuses a payload whose prefix is
// not its header's (a stale message that matched a wrapped tag), and drains the payload of every
// request it refuses, so no payload is left behind to be matched later.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/tag_layout.h"

namespace terse {

constexpr uint32_t kPsRequestMagic = 0x54505352;  // "RSPT"
constexpr uint32_t kPsReplyMagic = 0x54505350;    // "PSPT"
constexpr uint32_t kPsHeaderStep = 0;
constexpr uint32_t kPsPayloadStep = 1;
constexpr uint32_t kPsReplyStep = 2;

enum class PsRequestKind : uint8_t { kSend = 1, kReceive = 2, kClock = 3 };
// How a payload holds its values: the tensor's own elements, or a codec message.
enum class PsEncoding : uint8_t { kRaw = 0, kCodec = 1 };

struct PsRequestHeader {
  uint32_t magic = kPsRequestMagic;
  uint8_t kind = 0;      // PsRequestKind
  uint8_t rule = 0;      // tersePsRule_t, for sends
  uint8_t encoding = 0;  // PsEncoding of the payload
  uint8_t reserved = 0;
  uint32_t tensor = 0;  // the tensor's id, the same on every rank (ps_tensor.h)
  uint32_t shard = 0;
  uint32_t sequence = 0;  // the client's: names the payload and the reply
  uint32_t reserved2 = 0;
  // The payload message's size, PsPayloadPrefix included; 0: no payload message follows.
  uint64_t payload_bytes = 0;
  uint64_t clock = 0;      // kClock: the client's completed steps
  uint64_t staleness = 0;  // kClock: how far behind the slowest may be
};

// The start of every request payload; the values (or the codec's message) follow.
struct PsPayloadPrefix {
  uint32_t sequence = 0;  // the header's
  uint32_t tensor = 0;    // the header's
};
static_assert(sizeof(PsPayloadPrefix) == 8, "keeps the values 8-byte aligned in the payload");

// Room for the owner's sentence when it refuses a request.
constexpr size_t kPsReplyMessageBytes = 200;

struct PsReplyHeader {
  uint32_t magic = kPsReplyMagic;
  int32_t result = 0;  // ncclResult_t
  uint32_t sequence = 0;
  uint8_t encoding = 0;  // PsEncoding of the payload
  uint8_t reserved[3] = {};
  uint64_t payload_bytes = 0;
  char message[kPsReplyMessageBytes] = {};
};

constexpr uint32_t ps_header_operation() {
  return make_operation(0, kPsHeaderStep);
}
constexpr uint32_t ps_payload_operation(uint32_t sequence) {
  return make_operation(sequence, kPsPayloadStep);
}
constexpr uint32_t ps_reply_operation(uint32_t sequence) {
  return make_operation(sequence, kPsReplyStep);
}

}  // namespace terse
