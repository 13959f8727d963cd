// The plugin's communicators' common base (Comm below; send_comm.h and recv_comm.h derive from
// it), and the message protocol between a send comm and its receive comm (one direction, one
// UCX link each side). A data message is named on the wire by its NCCL tag and its ordinal among
// that tag's messages (tag_ordinals.h, net_wire.h's data_tag):
//
//   receiver: irecv(n buffers) takes the next ordinal of each buffer's tag and posts n UCX
//             receives tagged data_tag(tag, ordinal). When a buffer is larger than the sender's
//             eager bound (which the sender's handshake carries), it then sends a clear-to-send
//             {seq, (tag, ordinal, size) per buffer, framed} tagged clear_to_send_tag(seq); an
//             irecv of small buffers sends none (every message for it goes eagerly), so a small
//             message costs one UCX message and no reverse traffic.
//   sender:   isend(tag) takes the next ordinal of its tag. A message of at most the eager limit
//             (eager_setting.h) goes at once, tagged data_tag(tag, ordinal): UCX keeps it as
//             unexpected if its receive is not posted yet. A larger one waits (returning no
//             request, NCCL's "retry") until the clear-to-send naming (tag, ordinal) arrived,
//             is refused if larger than the buffer posted for it (or if a later ordinal of its
//             tag was announced and its own was not: its buffer was small), and then goes the
//             same way. The sender reads every clear-to-send in sequence order as it arrives and
//             keeps the entries no send has used yet.
//
// The k-th send of tag t meets the k-th receive of tag t, which is NCCL's matching rule
// (receives match sends in posting order, tags within a grouped receive): an eager message that
// overtakes a rendezvous one, or arrives before its receive, still lands in its own buffer. A
// large message lands in a receive posted for it (no unexpected-message copies). A receive is
// done when its messages arrived, whether or not its clear-to-send has left: a sender that sent
// eagerly need not progress that comm again soon, and over shared memory the clear-to-send
// leaves only when it does. So clear-to-sends live in the receive comm (twice as many slots as
// requests); irecv answers "retry" while the next slot's send is unfinished.
//
// A framed message is a FrameHeader (into the request) and then the payload (into the buffer):
// the bytes as they are, or their encoding (lossless_codec.h), decoded into the buffer once it
// arrived. Whether a receive comm wants framing travels in the handshake, so an eager send knows
// before any clear-to-send.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_wire.h"
#include "plugin/net/registration_cache.h"
#include "plugin/net/request.h"
#include "transport/link.h"
#include "transport/link_handshake.h"
#include "transport/socket.h"

namespace terse::net {

struct ByteCounters {
  uint64_t messages = 0;
  uint64_t raw_bytes = 0;   // what NCCL asked to move
  uint64_t wire_bytes = 0;  // what went through UCX (headers and encodings included)
  uint64_t encoded_messages = 0;
  uint64_t untried_messages = 0;  // sent as they are without an encode: recent ones did not pay
};

// What a send and a receive comm share: the link, its lifeline, counters, registrations.
class Comm {
 public:
  Comm(bool is_send, int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer);
  virtual ~Comm();

  bool is_send() const { return is_send_; }
  int dev() const { return dev_; }
  RegistrationCache& registrations() { return registrations_; }

  virtual ncclResult_t test(Request* request, int* done, int* sizes) = 0;
  // `pointer` as one of this comm's requests in flight; null when it is none. An address
  // comparison, not a search: NCCL's proxy calls test() for every request again and again.
  Request* request_at(void* pointer);
  // Closes: waits for coder jobs, cancels what can be, flushes the link (bounded), says
  // farewell, logs the counters.
  ncclResult_t close();
  // Moves this comm's side of the handshake on (and its link): while one comm of this process
  // waits for its peer, the peer may be waiting on another of this process's comms.
  virtual void progress_handshake() { link_->progress(); }

 protected:
  Request* allocate_request();
  void release_request(Request* request);
  int requests_in_use() const;
  // The peer's state from the lifeline, looked at every 64th call (a system call each time).
  PeerLifeline::State peer_state(bool now = false);
  // How many messages the peer said it sent when it closed (0 before its farewell).
  uint64_t farewell_count() const;
  // The failure of `transfer` (finished with an error) in NCCL's terms.
  ncclResult_t transfer_failed(ucs_status_t status, const char* what);
  virtual uint64_t messages_sent() const = 0;
  // Reads what the peer sent this comm for its own bookkeeping, so that close leaves nothing
  // unexpected in UCX (the sender's clear-to-sends that eager sends never waited for).
  virtual void drain_before_close() {}
  // The close handshake (net_wire.h), before the link closes: a send comm says how many messages
  // it sent and waits for the receiver's word that it has them all; a receive comm answers a
  // sender's count it has reached. Only on a graceful close.
  virtual void close_handshake() {}
  // The comm's own standing receives (the sender's clear-to-send slots), cancelled at close.
  virtual TransferRequest* standing_receives(int* count) {
    *count = 0;
    return nullptr;
  }
  // The comm's own sends that may outlive their request (the receiver's clear-to-sends):
  // flushed with the link at close, then given back.
  virtual TransferRequest* lingering_sends(int* count) {
    *count = 0;
    return nullptr;
  }

  bool is_send_;
  int dev_;
  std::unique_ptr<Link> link_;
  Socket lifeline_socket_;
  PeerLifeline lifeline_;
  std::string peer_;  // "host:port" of the other end, for messages
  RegistrationCache registrations_;
  ByteCounters counters_;
  Request requests_[netabi::kMaxRequests];
  unsigned polls_ = 0;
  bool failed_ = false;
  // The close handshake's messages: [0] what this comm sends, [1] what it receives.
  TransferRequest close_transfers_[2];
  CloseCount close_records_[2]{};
  ucp_dt_iov_t close_pieces_[2]{};
};

}  // namespace terse::net
