// The receive comm: irecv and its clear-to-sends, arrivals and their decodes, and the answer to
// the sender's close count (the protocol: net_comm.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "plugin/net/net_comm.h"
#include "plugin/net/tag_ordinals.h"

namespace terse::net {

class RecvComm : public Comm {
 public:
  RecvComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer, bool framed,
           uint64_t peer_eager_bytes);
  // Posts the receive of the sender's close count (net_wire.h).
  ncclResult_t start();
  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     void** request);
  ncclResult_t test(Request* request, int* done, int* sizes) override;
  void progress_handshake() override;

 private:
  void close_handshake() override;
  TransferRequest* lingering_sends(int* count) override {
    *count = kClearToSendSlots;
    return clear_to_send_transfers_;
  }
  // test() but for what every return needs (the close answer, settled decodes on failure).
  ncclResult_t test_entries(Request* request, int* done, int* sizes);
  // Answers the sender's close count once this comm has received that many data messages.
  void answer_sender_done();
  uint64_t messages_sent() const override { return clear_to_sends_sent_; }
  // A message arrived: checks its frame and counts it; `*decode` when it is an encoding.
  ncclResult_t accept_arrival(Request::Entry* entry, bool framed, bool* decode);
  // Announces an irecv's n buffers in clear-to-send slot `slot` (the next sequence).
  ncclResult_t send_clear_to_send(int slot, int n, const int* tags, const uint32_t* ordinals,
                                  const size_t* sizes);
  // Queues the decode of an arrived encoding into the receive buffer.
  void start_decode(Request::Entry* entry);

  // Clear-to-sends live in the comm, not in the request that announced them: a receive whose
  // messages all arrived is done even while its clear-to-send is still on its way (a sender
  // whose messages went eagerly need not have read it, and over shared memory it leaves only when
  // the sender's process progresses that comm). A slot is reused once its send finished; while
  // the next one is busy, irecv answers "retry" (no request).
  static constexpr int kClearToSendSlots = 2 * netabi::kMaxRequests;
  ClearToSend clear_to_sends_[kClearToSendSlots]{};
  ucp_dt_iov_t clear_to_send_pieces_[kClearToSendSlots]{};
  TransferRequest clear_to_send_transfers_[kClearToSendSlots];

  bool framed_;
  // The sender's eager bound (handshake): buffers of at most this size need no clear-to-send.
  uint64_t peer_eager_bytes_;
  uint32_t next_sequence_ = 0;
  TagOrdinals posted_ordinals_;
  uint64_t clear_to_sends_sent_ = 0;
  uint64_t data_messages_received_ = 0;
  bool answered_ = false;  // the delivered message went
};

}  // namespace terse::net
