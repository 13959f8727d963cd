// The comm base (net_comm.h): construction, the peer's state from the lifeline, transfer failures,
// and close; with the list of open comms and the close deadline (net_comm_internal.h).
#include "plugin/net/net_comm.h"

#include <algorithm>

#include <cinttypes>
#include <cstring>

#include "common/log.h"
#include "common/result.h"
#include "plugin/net/net_comm_internal.h"
#include "plugin/net/net_log.h"
#include "transport/deadline.h"
#include "transport/transport_settings.h"

namespace terse::net {
namespace {

// How long a close waits for its link to flush and its farewell to leave when the peer is
// alive but slow; a peer that is gone ends the wait at once. TERSE_TIMEOUT_S bounds it too.
constexpr double kCloseSeconds = 10;

}  // namespace

std::vector<Comm*>& open_comms() {
  static auto* comms = new std::vector<Comm*>();
  return *comms;
}

Deadline close_deadline() {
  double timeout = kDefaultTransportTimeoutSeconds;
  if (transport_timeout_seconds(&timeout) != ncclSuccess) timeout = kDefaultTransportTimeoutSeconds;
  return Deadline::after_seconds(std::min(timeout, kCloseSeconds));
}

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
  }
  for (int i = 0; i < standing_count; ++i) Link::abandon(&standing[i]);
  int lingering_count = 0;
  TransferRequest* lingering = lingering_sends(&lingering_count);
  for (int i = 0; i < lingering_count; ++i) Link::abandon(&lingering[i]);
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

}  // namespace terse::net
