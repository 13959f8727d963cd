// The plugin's communicators and requests, and the message protocol between a send comm and its
// receive comm (one direction, one UCX link each side). A data message is named on the wire by its
// NCCL tag and its ordinal among that tag's messages (tag_ordinals.h, net_wire.h's data_tag):
//
//   receiver: irecv(n buffers) takes the next ordinal of each buffer's tag, posts n UCX receives
//             tagged data_tag(tag, ordinal), then sends a clear-to-send {seq, (tag, ordinal,
//             size) per buffer, framed} tagged clear_to_send_tag(seq);
//   sender:   isend(tag) takes the next ordinal of its tag. A message of at most the eager limit
//             (eager_setting.h) goes at once, tagged data_tag(tag, ordinal): UCX keeps it as
//             unexpected if its receive is not posted yet. A larger one waits (returning no
//             request, NCCL's "retry") until the clear-to-send naming (tag, ordinal) arrived,
//             is refused if larger than the buffer posted for it, and then goes the same way.
//             The sender reads every clear-to-send in sequence order as it arrives and keeps the
//             entries no send has used yet.
//
// The k-th send of tag t meets the k-th receive of tag t, which is NCCL's matching rule
// (receives match sends in posting order, tags within a grouped receive): an eager message that
// overtakes a rendezvous one, or arrives before its receive, still lands in its own buffer. A
// large message lands in a receive posted for it (no unexpected-message copies), and a receiver
// never has more than NCCL_NET_MAX_REQUESTS clear-to-sends outstanding, so the sender keeps one
// posted receive per request slot.
//
// A framed message is a FrameHeader (into the request) and then the payload (into the buffer):
// the bytes as they are, or their encoding (lossless_codec.h), decoded into the buffer once it
// arrived. Whether a receive comm wants framing travels in the handshake, so an eager send knows
// before any clear-to-send.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/net/coder_pool.h"
#include "plugin/net/compression_setting.h"
#include "plugin/net/lossless_codec.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_wire.h"
#include "plugin/net/registration_cache.h"
#include "plugin/net/tag_ordinals.h"
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

class Comm;

struct Request {
  struct Entry {
    TransferRequest transfer;         // the payload
    TransferRequest header_transfer;  // a framed message's header
    FrameHeader header{};
    ucp_dt_iov_t pieces[2]{};
    void* data = nullptr;
    size_t size = 0;    // posted (receive) or sent (send) bytes
    size_t result = 0;  // bytes test() reports
    bool complete = false;
    std::vector<uint8_t> staging;  // the encoded message (send), its copy for decoding (receive)
    // The entry's encode (send) or decode (receive) on the coder pool; `coding` while its outcome
    // is not yet used.
    CoderJob job;
    bool coding = false;
    uint64_t tag = 0;    // send: the UCX tag, to post once encoded
    bool tried = false;  // send: an encode was attempted
    size_t encoded = 0;  // send: the encoding's size (0: send the bytes as they are)
    ncclResult_t decoded = ncclSuccess;  // receive: the decode's outcome
  };
  Comm* comm = nullptr;
  bool in_use = false;
  bool framed = false;
  int count = 0;
  Entry entries[kMaxGroupedReceives];
  // Receive side: the clear-to-send this irecv announced.
  ClearToSend clear_to_send{};
  ucp_dt_iov_t clear_to_send_piece{};
  TransferRequest clear_to_send_transfer;
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

class SendComm : public Comm {
 public:
  SendComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer,
           CompressMode mode, int zstd_level, bool framed, size_t eager_bytes);
  // Posts this comm's standing clear-to-send receives.
  ncclResult_t start();
  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t test(Request* request, int* done, int* sizes) override;

 private:
  uint64_t messages_sent() const override { return data_messages_sent_; }
  TransferRequest* standing_receives(int* count) override {
    *count = netabi::kMaxRequests;
    return slot_transfers_;
  }
  void drain_before_close() override;
  void close_handshake() override;
  ncclResult_t post_clear_to_send_receive(int slot);
  // Posts `entry` to UCX: its encoding when that came out smaller, else its bytes.
  ncclResult_t post_entry(Request::Entry& entry, bool framed);
  // Posts every entry whose encoding finished.
  ncclResult_t post_encoded();
  // Takes in every clear-to-send that arrived, in sequence order: its entries join announced_
  // unless their message already went eagerly; each slot is posted again for the sequence 32 on.
  ncclResult_t read_clear_to_sends();
  // The announced entry for (tag, ordinal), or -1.
  int find_announced(int32_t tag, uint32_t ordinal) const;
  // An error when the receiving process is gone or closed its comm; success otherwise.
  ncclResult_t receiver_alive(const char* what);

  struct Announced {
    int32_t tag;
    uint32_t ordinal;
    uint64_t size;
  };

  CompressMode mode_;
  int zstd_level_;
  bool framed_;         // the receive comm asked for framed messages (handshake)
  size_t eager_bytes_;  // messages up to this size go without waiting for a clear-to-send
  ClearToSend slots_[netabi::kMaxRequests]{};
  ucp_dt_iov_t slot_pieces_[netabi::kMaxRequests]{};
  TransferRequest slot_transfers_[netabi::kMaxRequests];
  uint32_t next_sequence_ = 0;  // the clear-to-send to read next
  TagOrdinals sent_ordinals_;
  // Receives the peer announced that no send has used yet: at most its 32 irecvs of 8 each.
  std::vector<Announced> announced_;
  uint64_t clear_to_sends_received_ = 0;
  int eager_sends_unprogressed_ = 0;
  // Encodes in a row that did not shrink their message enough to pay; past a few, only every
  // kRetryEncodeEvery-th eligible message tries (random or already-compressed bytes).
  int futile_encodes_ = 0;
  uint64_t eligible_while_futile_ = 0;
  uint64_t data_messages_sent_ = 0;
};

class RecvComm : public Comm {
 public:
  RecvComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer, bool framed);
  // Posts the receive of the sender's close count (net_wire.h).
  ncclResult_t start();
  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     void** request);
  ncclResult_t test(Request* request, int* done, int* sizes) override;
  void progress_handshake() override;

 private:
  void close_handshake() override;
  // test() but for what every return needs (the close answer, settled decodes on failure).
  ncclResult_t test_entries(Request* request, int* done, int* sizes);
  // Answers the sender's close count once this comm has received that many data messages.
  void answer_sender_done();
  uint64_t messages_sent() const override { return clear_to_sends_sent_; }
  // A message arrived: checks its frame and counts it; `*decode` when it is an encoding.
  ncclResult_t accept_arrival(Request::Entry* entry, bool framed, bool* decode);
  // Queues the decode of an arrived encoding into the receive buffer.
  void start_decode(Request::Entry* entry);

  bool framed_;
  uint32_t next_sequence_ = 0;
  TagOrdinals posted_ordinals_;
  uint64_t clear_to_sends_sent_ = 0;
  uint64_t data_messages_received_ = 0;
  bool answered_ = false;  // the delivered message went
};

}  // namespace terse::net
