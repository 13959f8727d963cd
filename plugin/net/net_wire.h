// What the plugin puts on the wire besides NCCL's bytes:
//
// - the listen handle (inside NCCL's 128-byte handle, exchanged by NCCL out of band): where the
//   listen comm waits, a nonce naming it, and the connecting side's own progress pointer;
// - the handshake frame each side sends over that TCP connection (link_handshake.h), with the
//   accepting (receiving) side's wish for framed messages (an eager send goes before any
//   clear-to-send could say so);
// - the clear-to-send a receive comm sends for an irecv with a buffer larger than the sender's
//   eager bound: its sequence number, its entries' tags, per-tag ordinals and sizes, and whether
//   it wants framed messages;
// - the header of a framed message (its own message, just before it): raw or encoded, and the
//   raw size;
// - the farewell a comm sends when it closes: how many messages it sent;
// - the close handshake: a send comm closing gracefully says how many data messages it sent, and
//   waits until the receive comm answers that it has received them all (bounded by the close
//   deadline). A send that test() reported done may still be in UCX's or the kernel's buffers;
//   over TCP a process that exits, or a socket closed with unread bytes, resets the connection
//   and the receiver loses what was still in flight.
//
// The fixed-size records are copied as they are: both ends are little-endian LP64 builds of this
// plugin (the handshake's magic and version refuse anything else).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/net/net_abi.h"

namespace terse::net {

constexpr uint32_t kHandleMagic = 0x54455231;  // "TER1"
constexpr uint32_t kHandshakeMagic = 0x54455248;
constexpr uint32_t kFrameMagic = 0x54455246;
// 2: framed in the handshake, tags by (tag, ordinal); 3: the sender's eager bound in the
// handshake, no clear-to-send for receives its eager sends fill.
constexpr uint16_t kWireVersion = 3;
// Receives one irecv may group (maxRecvs).
constexpr int kMaxGroupedReceives = 8;

struct ConnectStage;  // connect_comm.h

struct ListenHandle {
  uint32_t magic;
  uint16_t family;  // AF_INET
  uint16_t port;    // host order
  uint8_t address[16];
  uint64_t nonce;
  ConnectStage* stage;  // the connecting process's own; null as listen writes it
};
static_assert(sizeof(ListenHandle) <= netabi::kHandleMaxBytes);

struct Handshake {
  uint64_t nonce = 0;
  std::string host;  // host_identity(): same host means UCX may use shared memory
  std::vector<uint8_t> worker_address;
  // The receiving (accepting) side's wish for framed messages; the connecting side sends false.
  bool framed = false;
  // The sending (connecting) side's eager bound (eager_setting.h): a message of at most this many
  // bytes goes without waiting for a clear-to-send, so a receive of at most this many bytes needs
  // none. The accepting side sends 0.
  uint64_t eager_bytes = 0;
};
std::vector<uint8_t> encode_handshake(const Handshake& handshake);
bool decode_handshake(const std::vector<uint8_t>& bytes, Handshake* out);

struct ClearToSendEntry {
  int32_t tag;
  uint32_t ordinal;  // how many receives of this tag the comm posted before this one
  uint64_t size;
};
struct ClearToSend {
  uint32_t sequence;
  uint16_t count;   // 1..kMaxGroupedReceives
  uint16_t framed;  // 1: send a FrameHeader in front of each message
  ClearToSendEntry entries[kMaxGroupedReceives];
};

enum FrameKind : uint32_t { kFrameRaw = 0, kFrameLossless = 1 };
struct FrameHeader {
  uint32_t magic;
  uint32_t kind;
  uint64_t raw_bytes;
};
static_assert(sizeof(FrameHeader) == 16);

struct Farewell {
  uint64_t messages_sent;  // data messages (send comm) or clear-to-sends (receive comm)
};

// UCX tags on a comm's own worker: bit 63 tells a clear-to-send from data; bit 62 marks a
// framed message's header, which travels as a message of its own ahead of the payload (a
// contiguous payload shorter than its receive is UCX's plainest case; a gathered header + payload
// received into a larger scattered buffer failed with "Endpoint timeout" over TCP in UCX 1.13 for
// 16 MiB). A data message is named by its NCCL tag and its ordinal among the messages of that tag
// (bits 61..32, modulo 2^30), which both ends count alike without talking: the k-th send of tag t
// is the k-th receive of tag t, which is NCCL's rule (receives in posting order, tags within a
// grouped receive). So an eager message can go before its receive is posted (UCX keeps it as
// unexpected until a receive of its exact tag comes), and an eager and a rendezvous message can
// overtake each other on the wire without landing in each other's buffers.
constexpr uint64_t kClearToSendTagBit = 1ull << 63;
constexpr uint64_t kFrameHeaderTagBit = 1ull << 62;
constexpr uint32_t kOrdinalMask = (1u << 30) - 1;
inline uint64_t data_tag(int32_t tag, uint32_t ordinal) {
  return (static_cast<uint64_t>(ordinal & kOrdinalMask) << 32) | static_cast<uint32_t>(tag);
}
inline uint64_t clear_to_send_tag(uint32_t sequence) {
  return kClearToSendTagBit | sequence;
}
// The close handshake's two messages, tagged with bits 63 and 62 together, which no
// clear-to-send (bit 63 and a 32-bit sequence) or framed header (bit 62 alone) carries.
constexpr uint64_t kSenderDoneTag = kClearToSendTagBit | kFrameHeaderTagBit | 1;
constexpr uint64_t kDeliveredTag = kClearToSendTagBit | kFrameHeaderTagBit | 2;
struct CloseCount {
  uint64_t messages;  // sender done: data messages sent; delivered: data messages received
};

}  // namespace terse::net
