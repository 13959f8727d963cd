// The send comm: isend, its clear-to-send bookkeeping and encodes, and the sender's side of the
// close handshake (the protocol: net_comm.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/net/compression_setting.h"
#include "plugin/net/net_comm.h"
#include "plugin/net/tag_ordinals.h"

namespace terse::net {

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
  // Per tag, the ordinal after the last one a clear-to-send named: a message before it that no
  // clear-to-send named had its receive posted unannounced, so its buffer holds at most this
  // side's eager bound (recv_comm.cpp's irecv).
  TagOrdinals announced_ordinals_;
  // Receives the peer announced that no send has used yet: at most its 32 irecvs of 8 each.
  std::vector<Announced> announced_;
  uint64_t clear_to_sends_received_ = 0;
  int eager_sends_unprogressed_ = 0;
  // Encodes in a row that did not shrink their message enough to pay; past a few, only every
  // kRetryEncodeEvery-th eligible message tries (random or already-compressed bytes). The rule:
  // encode_gate.h.
  int futile_encodes_ = 0;
  uint64_t eligible_while_futile_ = 0;
  uint64_t data_messages_sent_ = 0;
};

}  // namespace terse::net
