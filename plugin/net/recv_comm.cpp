// The receive comm (recv_comm.h): irecv and its clear-to-send, test with the arrivals' frames and
// decodes, and the answer to the sender's close count.
#include "plugin/net/recv_comm.h"

#include <cinttypes>
#include <cstddef>
#include <cstdint>

#include "common/result.h"
#include "plugin/net/coder_pool.h"
#include "plugin/net/lossless_codec.h"
#include "plugin/net/net_comm_internal.h"
#include "plugin/net/net_log.h"
#include "plugin/net/registration_cache.h"

namespace terse::net {

RecvComm::RecvComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer,
                   bool framed, uint64_t peer_eager_bytes)
    : Comm(false, dev, std::move(link), std::move(lifeline), std::move(peer)),
      framed_(framed),
      peer_eager_bytes_(peer_eager_bytes) {}

ncclResult_t RecvComm::start() {
  close_pieces_[1] = ucp_dt_iov_t{&close_records_[1], sizeof(CloseCount)};
  return link_->recv(kSenderDoneTag, &close_pieces_[1], 1, &close_transfers_[1]);
}

void RecvComm::answer_sender_done() {
  ucs_status_t status = UCS_INPROGRESS;
  // A comm that failed will receive nothing more: it answers with what it has at once, so the
  // sender's close learns the shortfall now instead of at its deadline.
  if (answered_ || !close_transfers_[1].posted() || !finished(close_transfers_[1], &status) ||
      status != UCS_OK || (!failed_ && data_messages_received_ < close_records_[1].messages)) {
    return;
  }
  answered_ = true;
  close_records_[0].messages = data_messages_received_;
  close_pieces_[0] = ucp_dt_iov_t{&close_records_[0], sizeof(CloseCount)};
  if (link_->send(kDeliveredTag, &close_pieces_[0], 1, &close_transfers_[0]) != ncclSuccess) {
    clear_last_error();
  }
}

void RecvComm::progress_handshake() {
  link_->progress();
  answer_sender_done();
}

void RecvComm::close_handshake() {
  // A sender closing at the same time gets its answer before this link closes.
  for (int round = 0; round < 4; ++round) progress_handshake();
}

ncclResult_t RecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                             void** mhandles, void** request) {
  *request = nullptr;
  if (failed_)
    return NET_FAIL(ncclRemoteError, "irecv on a comm from %s that failed", peer_.c_str());
  if (n < 1 || n > kMaxGroupedReceives) {
    return NET_FAIL(ncclInvalidArgument, "irecv: n = %d (this plugin groups 1 to %d receives)", n,
                    kMaxGroupedReceives);
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr || mhandles == nullptr) {
    return NET_FAIL(ncclInvalidArgument, "irecv: data, sizes, tags and mhandles must not be NULL");
  }
  for (int i = 0; i < n; ++i) {
    auto* region = static_cast<MemoryRegion*>(mhandles[i]);
    if (region == nullptr || !RegistrationCache::covers(region, data[i], sizes[i])) {
      return NET_FAIL(ncclInvalidArgument,
                      "irecv: data[%d] %p + sizes[%d] %zu is not inside the memory registered as "
                      "mhandles[%d] %p",
                      i, data[i], i, sizes[i], i, mhandles[i]);
    }
  }
  // Only a buffer larger than the sender's eager bound needs a clear-to-send: any message for a
  // smaller one goes eagerly. When one does, the clear-to-send names every buffer of the irecv,
  // so that the sender checks each message's size against its buffer.
  bool announce = false;
  for (int i = 0; i < n; ++i) announce = announce || sizes[i] > peer_eager_bytes_;
  const int slot = static_cast<int>(next_sequence_ % kClearToSendSlots);
  if (announce) {
    ucs_status_t status = UCS_INPROGRESS;
    if (!finished(clear_to_send_transfers_[slot], &status)) {
      link_->progress();
      // Still on its way: NCCL calls again (a null request is its "retry").
      if (!finished(clear_to_send_transfers_[slot], &status)) return ncclSuccess;
    }
    if (status != UCS_OK) return transfer_failed(status, "a clear-to-send");
  }
  Request* posted = allocate_request();
  if (posted == nullptr) {
    return NET_FAIL(ncclInvalidUsage, "irecv: more than %d requests in flight on one comm",
                    netabi::kMaxRequests);
  }
  posted->count = n;
  posted->framed = framed_;
  posted->clear_to_send_slot = announce ? slot : -1;
  uint32_t ordinals[kMaxGroupedReceives];
  for (int i = 0; i < n; ++i) {
    Request::Entry& entry = posted->entries[i];
    entry.data = data[i];
    entry.size = sizes[i];
    entry.complete = false;
    entry.coding = false;
    entry.pieces[0] = ucp_dt_iov_t{&entry.header, sizeof(FrameHeader)};
    entry.pieces[1] = ucp_dt_iov_t{data[i], sizes[i]};
    ordinals[i] = posted_ordinals_.take(tags[i]);
    uint64_t tag = data_tag(tags[i], ordinals[i]);
    ncclResult_t result = ncclSuccess;
    if (framed_) {
      result = link_->recv(tag | kFrameHeaderTagBit, &entry.pieces[0], 1, &entry.header_transfer);
    }
    if (result == ncclSuccess) result = link_->recv(tag, &entry.pieces[1], 1, &entry.transfer);
    if (result != ncclSuccess) {
      failed_ = true;
      return result;
    }
  }
  if (announce) {
    ncclResult_t result = send_clear_to_send(slot, n, tags, ordinals, sizes);
    if (result != ncclSuccess) {
      failed_ = true;
      return result;
    }
  }
  *request = posted;
  return ncclSuccess;
}

ncclResult_t RecvComm::send_clear_to_send(int slot, int n, const int* tags,
                                          const uint32_t* ordinals, const size_t* sizes) {
  ClearToSend& clear = clear_to_sends_[slot];
  clear = ClearToSend{};
  clear.sequence = next_sequence_;
  clear.count = static_cast<uint16_t>(n);
  clear.framed = framed_ ? 1 : 0;
  for (int i = 0; i < n; ++i) clear.entries[i] = ClearToSendEntry{tags[i], ordinals[i], sizes[i]};
  clear_to_send_pieces_[slot] =
      ucp_dt_iov_t{&clear, offsetof(ClearToSend, entries) + n * sizeof(ClearToSendEntry)};
  TERSE_CHECK(link_->send(clear_to_send_tag(next_sequence_), &clear_to_send_pieces_[slot], 1,
                          &clear_to_send_transfers_[slot]));
  ++next_sequence_;
  ++clear_to_sends_sent_;
  return ncclSuccess;
}

ncclResult_t RecvComm::accept_arrival(Request::Entry* entry, bool framed, bool* decode) {
  *decode = false;
  size_t received = entry->transfer.received_bytes();
  ++data_messages_received_;
  ++counters_.messages;
  counters_.wire_bytes += received;
  if (!framed) {
    entry->result = received;
    counters_.raw_bytes += received;
    return ncclSuccess;
  }
  const FrameHeader& header = entry->header;
  size_t payload = received;
  size_t header_bytes = entry->header_transfer.received_bytes();
  counters_.wire_bytes += header_bytes;
  bool raw_ok = header.kind == kFrameRaw && header.raw_bytes == payload;
  bool encoded_ok = header.kind == kFrameLossless && header.raw_bytes <= entry->size;
  if (header_bytes != sizeof(FrameHeader) || header.magic != kFrameMagic ||
      !(raw_ok || encoded_ok)) {
    failed_ = true;
    return NET_FAIL(ncclRemoteError,
                    "a framed message of %zu bytes from %s has a bad header (kind %u, %" PRIu64
                    " raw bytes, receive of %zu)",
                    received, peer_.c_str(), header.kind, header.raw_bytes, entry->size);
  }
  entry->result = header.raw_bytes;
  counters_.raw_bytes += header.raw_bytes;
  if (header.kind == kFrameLossless) {
    ++counters_.encoded_messages;
    entry->encoded = payload;
    *decode = true;
  }
  return ncclSuccess;
}

void RecvComm::start_decode(Request::Entry* entry) {
  entry->job.level = 1;  // decoding does not depend on the level
  entry->job.work = [entry](LosslessCodec& codec) {
    // The encoding landed in the receive buffer itself; decode from a copy of it.
    uint8_t* data = static_cast<uint8_t*>(entry->data);
    entry->staging.assign(data, data + entry->encoded);
    entry->decoded =
        codec.decode(entry->staging.data(), entry->encoded, entry->data, entry->result);
  };
  entry->coding = true;
  CoderPool::instance().submit(&entry->job);
}

ncclResult_t RecvComm::test(Request* request, int* done, int* sizes) {
  const ncclResult_t result = test_entries(request, done, sizes);
  // A sender's close count this comm has now reached is answered.
  answer_sender_done();
  if (result != ncclSuccess) {
    // The caller may free the buffers once it has the error: no decode may write them after.
    for (int i = 0; i < request->count; ++i) {
      if (request->entries[i].coding) CoderPool::wait(request->entries[i].job);
    }
  }
  return result;
}

ncclResult_t RecvComm::test_entries(Request* request, int* done, int* sizes) {
  *done = 0;
  bool progressed = false;
  for (;;) {
    bool all = true;
    bool awaiting_data = false;  // a header or payload has not arrived (decodes do not count)
    for (int i = 0; i < request->count; ++i) {
      Request::Entry& entry = request->entries[i];
      if (entry.complete) continue;
      if (entry.coding) {
        if (!entry.job.done.load(std::memory_order_acquire)) {
          all = false;
          continue;
        }
        entry.coding = false;
        if (entry.decoded != ncclSuccess) {
          failed_ = true;
          return entry.decoded;
        }
        entry.complete = true;
        continue;
      }
      ucs_status_t status = UCS_INPROGRESS;
      if (!finished(entry.header_transfer, &status)) {
        all = false;
        awaiting_data = true;
        continue;
      }
      if (status != UCS_OK) return transfer_failed(status, "a message header");
      if (!finished(entry.transfer, &status)) {
        all = false;
        awaiting_data = true;
        continue;
      }
      if (status != UCS_OK) return transfer_failed(status, "a receive");
      bool decode = false;
      TERSE_CHECK(accept_arrival(&entry, request->framed, &decode));
      if (decode) {
        start_decode(&entry);
        all = false;
        continue;
      }
      entry.complete = true;
    }
    if (all) break;
    // The clear-to-send matters while a message is still to come: once every message arrived,
    // its outcome (a sender that closed right after sending resets it) changes nothing, and it
    // need not have left yet (recv_comm.h).
    ucs_status_t status = UCS_INPROGRESS;
    if (request->clear_to_send_slot >= 0 &&
        finished(clear_to_send_transfers_[request->clear_to_send_slot], &status) &&
        status != UCS_OK) {
      return transfer_failed(status, "a clear-to-send");
    }
    if (progressed) {
      if (link_->peer_error() != UCS_OK && awaiting_data) {
        return transfer_failed(link_->peer_error(), "a receive");
      }
      PeerLifeline::State state = peer_state();
      bool nothing_more = state == PeerLifeline::State::kClosedGracefully &&
                          data_messages_received_ >= farewell_count();
      if (awaiting_data && (state == PeerLifeline::State::kGone || nothing_more)) {
        failed_ = true;
        return NET_FAIL(ncclRemoteError, "a receive from %s: the sending process %s", peer_.c_str(),
                        nothing_more ? "closed its comm" : "is gone");
      }
      return ncclSuccess;
    }
    while (link_->progress() != 0) {
    }
    progressed = true;
  }
  *done = 1;
  if (sizes != nullptr) {
    for (int i = 0; i < request->count; ++i)
      sizes[i] = static_cast<int>(request->entries[i].result);
  }
  release_request(request);
  return ncclSuccess;
}

}  // namespace terse::net
