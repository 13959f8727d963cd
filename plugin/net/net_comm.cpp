#include "plugin/net/net_comm.h"

#include <algorithm>

#include <cinttypes>
#include <cstring>

#include "common/log.h"
#include "common/result.h"
#include "plugin/net/net_log.h"
#include "transport/deadline.h"
#include "transport/transport_settings.h"

namespace terse::net {
namespace {

// How long a close waits for its link to flush and its farewell to leave when the peer is
// alive but slow; a peer that is gone ends the wait at once. TERSE_TIMEOUT_S bounds it too.
constexpr double kCloseSeconds = 10;

// Encoding pays when it saves at least 3% (the encoder's time and the receiver's decode).
constexpr size_t kPayingPercent = 97;
// After this many encodes in a row that did not pay, only every kRetryEncodeEvery-th eligible
// message is tried: random bytes cost an encode each, up to 13% of a 1 Gbit/s link here.
constexpr int kFutileEncodes = 8;
constexpr uint64_t kRetryEncodeEvery = 32;

// Eager sends between two progresses of a send comm's worker made by isend itself.
constexpr int kEagerSendsPerProgress = 16;

// The most staging a request slot keeps between messages.
constexpr size_t kKeptStagingBytes = size_t{8} << 20;

// Every comm of this process that is open, in creation order. Only touched under the plugin's
// lock (net_api.cpp takes it around every call that creates, uses or closes a comm).
std::vector<Comm*>& open_comms() {
  static auto* comms = new std::vector<Comm*>();
  return *comms;
}

Deadline close_deadline() {
  double timeout = kDefaultTransportTimeoutSeconds;
  if (transport_timeout_seconds(&timeout) != ncclSuccess) timeout = kDefaultTransportTimeoutSeconds;
  return Deadline::after_seconds(std::min(timeout, kCloseSeconds));
}

bool finished(TransferRequest& transfer, ucs_status_t* status) {
  if (!transfer.posted()) {
    *status = UCS_OK;
    return true;
  }
  *status = transfer.status();
  return *status != UCS_INPROGRESS;
}

}  // namespace

Comm::Comm(bool is_send, int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer)
    : is_send_(is_send),
      dev_(dev),
      link_(std::move(link)),
      lifeline_socket_(std::move(lifeline)),
      peer_(std::move(peer)) {
  for (Request& request : requests_) request.comm = this;
  open_comms().push_back(this);
}

Comm::~Comm() {
  std::vector<Comm*>& comms = open_comms();
  comms.erase(std::remove(comms.begin(), comms.end(), this), comms.end());
}

Request* Comm::request_at(void* pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  auto first = reinterpret_cast<uintptr_t>(&requests_[0]);
  if (address < first || address >= first + sizeof(requests_)) return nullptr;
  if ((address - first) % sizeof(Request) != 0) return nullptr;
  Request* request = &requests_[(address - first) / sizeof(Request)];
  return request->in_use ? request : nullptr;
}

Request* Comm::allocate_request() {
  for (Request& request : requests_) {
    if (!request.in_use) {
      request.in_use = true;
      request.count = 0;
      request.framed = false;
      return &request;
    }
  }
  return nullptr;
}

void Comm::release_request(Request* request) {
  for (int i = 0; i < request->count; ++i) {
    Request::Entry& entry = request->entries[i];
    entry.complete = false;
    entry.result = 0;
    // A slot keeps its staging for the next message of NCCL's usual sizes, not a rare large one
    // (32 slots per comm, many comms).
    if (entry.staging.capacity() > kKeptStagingBytes) std::vector<uint8_t>().swap(entry.staging);
  }
  request->in_use = false;
}

int Comm::requests_in_use() const {
  int count = 0;
  for (const Request& request : requests_) count += request.in_use ? 1 : 0;
  return count;
}

PeerLifeline::State Comm::peer_state(bool now) {
  if (lifeline_.state() != PeerLifeline::State::kOpen) return lifeline_.state();
  if (!now && (++polls_ & 63) != 0) return lifeline_.state();
  return lifeline_.poll(lifeline_socket_);
}

ncclResult_t Comm::transfer_failed(ucs_status_t status, const char* what) {
  failed_ = true;
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    // An eager send does not wait to learn its receive's size, so a send larger than its
    // receive shows here, at the receiver, instead of at isend.
    return NET_FAIL(ncclInvalidUsage,
                    "%s from peer %s was larger than the buffer posted for it (UCX: %s)", what,
                    peer_.c_str(), ucs_status_string(status));
  }
  return NET_FAIL(ncclRemoteError, "%s %s peer %s failed: %s (UCX)", what, is_send_ ? "to" : "from",
                  peer_.c_str(), ucs_status_string(status));
}

uint64_t Comm::farewell_count() const {
  Farewell record{0};
  if (lifeline_.farewell().size() == sizeof(Farewell)) {
    memcpy(&record, lifeline_.farewell().data(), sizeof(record));
  }
  return record.messages_sent;
}

ncclResult_t Comm::close() {
  int in_flight = requests_in_use();
  if (in_flight > 0) {
    NET_INFO("closing a %s comm with peer %s with %d requests in flight",
             is_send_ ? "send" : "receive", peer_.c_str(), in_flight);
  }
  // A coder job may still read or write a request's buffers.
  for (Request& request : requests_) {
    for (int i = 0; i < request.count; ++i) {
      CoderPool::wait(request.entries[i].job);
      request.entries[i].coding = false;
    }
  }
  if (!failed_) drain_before_close();
  if (!failed_ && in_flight == 0) close_handshake();
  int standing_count = 0;
  TransferRequest* standing = standing_receives(&standing_count);
  for (int i = 0; i < standing_count; ++i) Link::cancel(&standing[i]);
  for (TransferRequest& transfer : close_transfers_) Link::cancel(&transfer);
  for (Request& request : requests_) {
    if (!request.in_use) continue;
    for (int i = 0; i < request.count; ++i) {
      Link::cancel(&request.entries[i].header_transfer);
      Link::cancel(&request.entries[i].transfer);
    }
  }
  // With requests in flight this is an abort: their peer may never progress them (in NCCL it is
  // tearing down too), so the flush is not waited for and the worker's destruction reclaims them.
  Deadline deadline = in_flight > 0 ? Deadline::after_seconds(0) : close_deadline();
  bool peer_alive = peer_state(true) == PeerLifeline::State::kOpen;
  // A forced close needs UCX's peer-failure mode; the link knows whether it has it.
  // Over TCP a flush finishes only once the peer's worker progressed, and the peer is closing
  // its comms one after another too (NCCL's proxy does), waiting on a comm of this process the
  // same way: so the wait progresses every other open comm of this process, or both ends would
  // sit out the deadline (10 s per comm, as the plugin measured before).
  link_->close(/*force=*/!peer_alive || in_flight > 0, deadline, [this] {
    for (Comm* other : open_comms()) {
      if (other != this) other->link_->progress();
    }
    return peer_state(true) != PeerLifeline::State::kOpen;
  });
  for (Request& request : requests_) {
    for (int i = 0; i < request.count; ++i) {
      Link::abandon(&request.entries[i].header_transfer);
      Link::abandon(&request.entries[i].transfer);
    }
    Link::abandon(&request.clear_to_send_transfer);
  }
  for (int i = 0; i < standing_count; ++i) Link::abandon(&standing[i]);
  for (TransferRequest& transfer : close_transfers_) Link::abandon(&transfer);
  if (peer_state(true) != PeerLifeline::State::kGone) {
    std::vector<uint8_t> farewell(sizeof(Farewell));
    Farewell record{messages_sent()};
    memcpy(farewell.data(), &record, sizeof(record));
    if (send_frame(lifeline_socket_, farewell, close_deadline()) != ncclSuccess) {
      clear_last_error();
    }
  }
  if (log_level() >= LogLevel::kInfo) {
    double ratio = counters_.wire_bytes > 0
                       ? static_cast<double>(counters_.raw_bytes) / counters_.wire_bytes
                       : 1.0;
    NET_INFO("%s comm with peer %s closed: %" PRIu64 " messages, %" PRIu64 " bytes raw, %" PRIu64
             " bytes on the wire (%.3fx), %" PRIu64 " encoded, %" PRIu64
             " sent without trying (encoding did not pay)",
             is_send_ ? "send" : "receive", peer_.c_str(), counters_.messages, counters_.raw_bytes,
             counters_.wire_bytes, ratio, counters_.encoded_messages, counters_.untried_messages);
  }
  return ncclSuccess;
}

// ---- send side ----

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
    if (eligible && futile_encodes_ >= kFutileEncodes &&
        ++eligible_while_futile_ % kRetryEncodeEvery != 0) {
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
      bool paid = entry.encoded > 0 && entry.encoded * 100 <= entry.size * kPayingPercent;
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

// ---- receive side ----

RecvComm::RecvComm(int dev, std::unique_ptr<Link> link, Socket lifeline, std::string peer,
                   bool framed)
    : Comm(false, dev, std::move(link), std::move(lifeline), std::move(peer)), framed_(framed) {}

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
  Request* posted = allocate_request();
  if (posted == nullptr) {
    return NET_FAIL(ncclInvalidUsage, "irecv: more than %d requests in flight on one comm",
                    netabi::kMaxRequests);
  }
  uint32_t sequence = next_sequence_;
  posted->count = n;
  posted->framed = framed_;
  ClearToSend& clear = posted->clear_to_send;
  clear = ClearToSend{};
  clear.sequence = sequence;
  clear.count = static_cast<uint16_t>(n);
  clear.framed = framed_ ? 1 : 0;
  for (int i = 0; i < n; ++i) {
    Request::Entry& entry = posted->entries[i];
    entry.data = data[i];
    entry.size = sizes[i];
    entry.complete = false;
    entry.coding = false;
    entry.pieces[0] = ucp_dt_iov_t{&entry.header, sizeof(FrameHeader)};
    entry.pieces[1] = ucp_dt_iov_t{data[i], sizes[i]};
    uint32_t ordinal = posted_ordinals_.take(tags[i]);
    uint64_t tag = data_tag(tags[i], ordinal);
    ncclResult_t result = ncclSuccess;
    if (framed_) {
      result = link_->recv(tag | kFrameHeaderTagBit, &entry.pieces[0], 1, &entry.header_transfer);
    }
    if (result == ncclSuccess) result = link_->recv(tag, &entry.pieces[1], 1, &entry.transfer);
    if (result != ncclSuccess) {
      failed_ = true;
      return result;
    }
    clear.entries[i] = ClearToSendEntry{tags[i], ordinal, sizes[i]};
  }
  posted->clear_to_send_piece =
      ucp_dt_iov_t{&clear, offsetof(ClearToSend, entries) + n * sizeof(ClearToSendEntry)};
  ncclResult_t result = link_->send(clear_to_send_tag(sequence), &posted->clear_to_send_piece, 1,
                                    &posted->clear_to_send_transfer);
  if (result != ncclSuccess) {
    failed_ = true;
    return result;
  }
  ++next_sequence_;
  ++clear_to_sends_sent_;
  *request = posted;
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
    // The clear-to-send matters while a message is still to come: once every message arrived,
    // its outcome (a sender that closed right after sending resets it) changes nothing.
    ucs_status_t status = UCS_INPROGRESS;
    if (!finished(request->clear_to_send_transfer, &status)) {
      if (all && peer_state() == PeerLifeline::State::kOpen) all = false;
    } else if (status != UCS_OK && !all) {
      return transfer_failed(status, "a clear-to-send");
    }
    if (all) break;
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
