// The send comm (send_comm.h): its standing clear-to-send receives and reading them, isend with
// its eager sends and encodes, test, and the sender's side of the close handshake.
#include "plugin/net/send_comm.h"

#include <cinttypes>
#include <cstddef>

#include "common/result.h"
#include "plugin/net/coder_pool.h"
#include "plugin/net/encode_gate.h"
#include "plugin/net/lossless_codec.h"
#include "plugin/net/net_comm_internal.h"
#include "plugin/net/net_log.h"
#include "transport/deadline.h"

namespace terse::net {
namespace {

// Eager sends between two progresses of a send comm's worker made by isend itself.
constexpr int kEagerSendsPerProgress = 16;

}  // namespace

SendComm::SendComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer,
                   CompressMode mode, int zstd_level, bool framed, size_t eager_bytes)
    : Comm(true, dev, std::move(link), std::move(lifeline), std::move(peer)),
      mode_(mode),
      zstd_level_(zstd_level),
      framed_(framed),
      eager_bytes_(eager_bytes) {
  announced_.reserve(netabi::kMaxRequests * kMaxGroupedReceives);
}

ncclResult_t SendComm::start() {
  for (int slot = 0; slot < netabi::kMaxRequests; ++slot) {
    TERSE_CHECK(post_clear_to_send_receive(slot));
  }
  return ncclSuccess;
}

ncclResult_t SendComm::post_clear_to_send_receive(int slot) {
  uint32_t sequence = next_sequence_ + static_cast<uint32_t>(slot);
  // Slot s always holds the clear-to-send of the sequence s modulo the slot count to come next.
  int index = static_cast<int>(sequence % netabi::kMaxRequests);
  slot_pieces_[index] = ucp_dt_iov_t{&slots_[index], sizeof(ClearToSend)};
  return link_->recv(clear_to_send_tag(sequence), &slot_pieces_[index], 1, &slot_transfers_[index]);
}

ncclResult_t SendComm::read_clear_to_sends() {
  for (;;) {
    int index = static_cast<int>(next_sequence_ % netabi::kMaxRequests);
    TransferRequest& transfer = slot_transfers_[index];
    ucs_status_t status = UCS_INPROGRESS;
    if (!finished(transfer, &status)) return ncclSuccess;
    if (status != UCS_OK) return transfer_failed(status, "a clear-to-send");
    ClearToSend& message = slots_[index];
    size_t expected = offsetof(ClearToSend, entries) + message.count * sizeof(ClearToSendEntry);
    if (message.sequence != next_sequence_ || message.count < 1 ||
        message.count > kMaxGroupedReceives || transfer.received_bytes() < expected ||
        (message.framed != 0) != framed_) {
      failed_ = true;
      return NET_FAIL(ncclRemoteError,
                      "peer %s sent a malformed clear-to-send (sequence %u, expected %u, %u "
                      "entries, framed %u)",
                      peer_.c_str(), message.sequence, next_sequence_, message.count,
                      message.framed);
    }
    for (int i = 0; i < message.count; ++i) {
      const ClearToSendEntry& entry = message.entries[i];
      announced_ordinals_.pass(entry.tag, entry.ordinal);
      // An ordinal behind the tag's count was an eager message that already went.
      if (static_cast<int32_t>(entry.ordinal - sent_ordinals_.peek(entry.tag)) < 0) continue;
      announced_.push_back(Announced{entry.tag, entry.ordinal, entry.size});
    }
    ++clear_to_sends_received_;
    ++next_sequence_;
    // The slot is free for the clear-to-send 32 sequences ahead.
    TERSE_CHECK(post_clear_to_send_receive(netabi::kMaxRequests - 1));
  }
}

void SendComm::drain_before_close() {
  // A few rounds: UCX over TCP hands over a bounded batch per progress.
  for (int round = 0; round < 4; ++round) {
    link_->progress();
    if (read_clear_to_sends() != ncclSuccess) {
      clear_last_error();
      return;
    }
  }
}

void SendComm::close_handshake() {
  if (peer_state(true) != PeerLifeline::State::kOpen || link_->peer_error() != UCS_OK) return;
  close_records_[0].messages = data_messages_sent_;
  close_pieces_[0] = ucp_dt_iov_t{&close_records_[0], sizeof(CloseCount)};
  close_pieces_[1] = ucp_dt_iov_t{&close_records_[1], sizeof(CloseCount)};
  if (link_->recv(kDeliveredTag, &close_pieces_[1], 1, &close_transfers_[1]) != ncclSuccess ||
      link_->send(kSenderDoneTag, &close_pieces_[0], 1, &close_transfers_[0]) != ncclSuccess) {
    clear_last_error();
    return;
  }
  const Deadline deadline = close_deadline();
  ucs_status_t status = UCS_INPROGRESS;
  const char* outcome = "the deadline passed";
  for (;;) {
    if (finished(close_transfers_[1], &status)) {
      outcome = status != UCS_OK                                   ? "the link failed"
                : close_records_[1].messages < data_messages_sent_ ? "the receiver counted fewer"
                                                                   : nullptr;
      break;
    }
    if (deadline.expired()) break;
    if (peer_state(true) != PeerLifeline::State::kOpen) {
      outcome = "the receiver closed or went away first";
      break;
    }
    link_->progress();
    if (read_clear_to_sends() != ncclSuccess) clear_last_error();
    // The receiver may itself be waiting on a comm of this process (both ends tear down).
    for (Comm* other : open_comms()) {
      if (other != this) other->progress_handshake();
    }
  }
  if (outcome != nullptr) {
    NET_INFO("send comm to %s closes without the receiver's word that it has all %" PRIu64
             " messages: %s",
             peer_.c_str(), data_messages_sent_, outcome);
  }
}

int SendComm::find_announced(int32_t tag, uint32_t ordinal) const {
  for (size_t i = 0; i < announced_.size(); ++i) {
    if (announced_[i].tag == tag && announced_[i].ordinal == ordinal) return static_cast<int>(i);
  }
  return -1;
}

ncclResult_t SendComm::receiver_alive(const char* what) {
  if (link_->peer_error() != UCS_OK) return transfer_failed(link_->peer_error(), what);
  PeerLifeline::State state = peer_state();
  if (state == PeerLifeline::State::kGone) {
    failed_ = true;
    return NET_FAIL(ncclRemoteError, "%s: the receiving process at %s is gone", what,
                    peer_.c_str());
  }
  if (state == PeerLifeline::State::kClosedGracefully) {
    failed_ = true;
    return NET_FAIL(ncclRemoteError, "%s: the receiver at %s closed its comm", what, peer_.c_str());
  }
  return ncclSuccess;
}

ncclResult_t SendComm::isend(void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  if (failed_) return NET_FAIL(ncclRemoteError, "isend on a comm to %s that failed", peer_.c_str());
  TERSE_CHECK(post_encoded());  // earlier messages whose encoding finished go out first
  auto* region = static_cast<MemoryRegion*>(mhandle);
  if (region == nullptr || !RegistrationCache::covers(region, data, size)) {
    return NET_FAIL(ncclInvalidArgument,
                    "isend: data %p + size %zu is not inside the memory registered as mhandle %p",
                    data, size, mhandle);
  }
  if (data == nullptr && size > 0) return NET_FAIL(ncclInvalidArgument, "isend: data is NULL");
  uint32_t ordinal = sent_ordinals_.peek(tag);
  // Reading the clear-to-sends keeps announced_ short and UCX's unexpected queue empty even when
  // every message goes eagerly (NCCL posts receives of its whole buffer, sends what it has).
  // An eager send usually completes inside UCX's call, so test() may never progress this
  // worker: without a progress here the clear-to-sends piled up unread (11 thousand after 10
  // thousand 64-byte sends over TCP) and, once the socket filled, the receiver's would stall.
  // Every kEagerSendsPerProgress-th eager send is enough to bound that; a progress in each one
  // (a system call over TCP) cut 64-byte bandwidth by about half.
  bool eager = size <= eager_bytes_;
  if (!eager || ++eager_sends_unprogressed_ >= kEagerSendsPerProgress) {
    eager_sends_unprogressed_ = 0;
    link_->progress();
  }
  TERSE_CHECK(read_clear_to_sends());
  int announced = find_announced(tag, ordinal);
  if (announced < 0 && !eager &&
      static_cast<int32_t>(announced_ordinals_.peek(tag) - ordinal) > 0) {
    return NET_FAIL(ncclInvalidUsage,
                    "isend of %zu bytes with tag %d, but the receiver posted at most %zu bytes "
                    "for it (message %u of that tag; larger buffers are announced): a send larger "
                    "than its receive",
                    size, tag, eager_bytes_, ordinal);
  }
  if (announced < 0 || eager) {
    // No matching receive yet: an eager message goes anyway, a larger one waits (NCCL calls
    // again). A receiver that closed or died never will post it.
    TERSE_CHECK(receiver_alive("isend"));
    if (!eager) return ncclSuccess;
  }
  if (announced >= 0 && size > announced_[announced].size) {
    return NET_FAIL(ncclInvalidUsage,
                    "isend of %zu bytes with tag %d, but the receiver posted %" PRIu64
                    " bytes for it (message %u of that tag): a send larger than its receive",
                    size, tag, announced_[announced].size, ordinal);
  }
  Request* posted = allocate_request();
  if (posted == nullptr) {
    return NET_FAIL(ncclInvalidUsage, "isend: more than %d requests in flight on one comm",
                    netabi::kMaxRequests);
  }
  if (announced >= 0) {
    announced_[announced] = announced_.back();
    announced_.pop_back();
  }
  posted->count = 1;
  posted->framed = framed_;
  Request::Entry& entry = posted->entries[0];
  entry.data = data;
  entry.size = size;
  entry.result = size;
  entry.complete = false;
  entry.tag = data_tag(tag, sent_ordinals_.take(tag));
  entry.encoded = 0;
  entry.coding = false;
  entry.pieces[0] = ucp_dt_iov_t{data, size};
  if (posted->framed) {
    entry.header = FrameHeader{kFrameMagic, kFrameRaw, size};
    entry.pieces[0] = ucp_dt_iov_t{&entry.header, sizeof(FrameHeader)};
    entry.pieces[1] = ucp_dt_iov_t{data, size};
    bool eligible = mode_ != CompressMode::kOff && size >= kMinEncodedBytes;
    if (eligible && encodes_futile(futile_encodes_) && !retry_encode(++eligible_while_futile_)) {
      eligible = false;
      ++counters_.untried_messages;
    }
    entry.tried = eligible;
    if (eligible) {
      entry.staging.resize(LosslessCodec::bound(size));
      entry.job.level = zstd_level_;
      Request::Entry* target = &entry;
      entry.job.work = [target](LosslessCodec& codec) {
        target->encoded = codec.encode(target->data, target->size, target->staging.data(),
                                       target->staging.size());
      };
      entry.coding = true;
      CoderPool::instance().submit(&entry.job);
    }
  }
  if (!entry.coding) {
    ncclResult_t result = post_entry(entry, posted->framed);
    if (result != ncclSuccess) {
      release_request(posted);
      failed_ = true;
      return result;
    }
  }
  ++data_messages_sent_;
  ++counters_.messages;
  counters_.raw_bytes += size;
  *request = posted;
  return ncclSuccess;
}

ncclResult_t SendComm::post_entry(Request::Entry& entry, bool framed) {
  if (framed) {
    if (entry.tried) {
      bool paid = encode_paid(entry.encoded, entry.size);
      futile_encodes_ = paid ? 0 : futile_encodes_ + 1;
    }
    if (entry.encoded > 0 && entry.encoded < entry.size) {
      entry.header.kind = kFrameLossless;
      entry.pieces[1] = ucp_dt_iov_t{entry.staging.data(), entry.encoded};
      ++counters_.encoded_messages;
    }
    TERSE_CHECK(
        link_->send(entry.tag | kFrameHeaderTagBit, &entry.pieces[0], 1, &entry.header_transfer));
    counters_.wire_bytes += sizeof(FrameHeader);
  }
  ucp_dt_iov_t& payload = entry.pieces[framed ? 1 : 0];
  TERSE_CHECK(link_->send(entry.tag, &payload, 1, &entry.transfer));
  counters_.wire_bytes += payload.length;
  return ncclSuccess;
}

ncclResult_t SendComm::post_encoded() {
  for (Request& request : requests_) {
    if (!request.in_use) continue;
    Request::Entry& entry = request.entries[0];
    if (!entry.coding || !entry.job.done.load(std::memory_order_acquire)) continue;
    entry.coding = false;
    ncclResult_t result = post_entry(entry, request.framed);
    if (result != ncclSuccess) {
      failed_ = true;
      return result;
    }
  }
  return ncclSuccess;
}

ncclResult_t SendComm::test(Request* request, int* done, int* sizes) {
  *done = 0;
  TERSE_CHECK(post_encoded());
  Request::Entry& entry = request->entries[0];
  ucs_status_t status = UCS_INPROGRESS;
  auto sent = [&entry, &status] {
    if (entry.coding || !finished(entry.header_transfer, &status)) return false;
    if (status != UCS_OK) return true;
    return finished(entry.transfer, &status);
  };
  if (!sent()) {
    while (link_->progress() != 0) {
    }
    if (!sent()) {
      if (link_->peer_error() != UCS_OK) return transfer_failed(link_->peer_error(), "a send");
      PeerLifeline::State state = peer_state();
      if (state == PeerLifeline::State::kGone) {
        failed_ = true;
        return NET_FAIL(ncclRemoteError, "a send to %s: the receiving process is gone",
                        peer_.c_str());
      }
      return ncclSuccess;
    }
  }
  if (status != UCS_OK) return transfer_failed(status, "a send");
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(entry.result);
  release_request(request);
  return ncclSuccess;
}

}  // namespace terse::net
