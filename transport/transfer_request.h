// One posted tagged send or receive of a host buffer (Link::send / Link::recv, which
// Transport::send / Transport::recv go through), until its owner sees it finish
// (Transport::wait, or the plugin's polls). The buffer must stay valid and untouched until then.
// Move-only; a default-constructed request holds nothing and counts as finished.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/ucx_worker.h"

namespace terse {

enum class TransferDirection { kSend, kReceive };

class TransferRequest {
 public:
  TransferRequest() = default;
  // Releasing an unfinished request cancels it first (and says so at WARN: callers should wait).
  ~TransferRequest() { release(); }
  TransferRequest(TransferRequest&& other) noexcept { *this = std::move(other); }
  TransferRequest& operator=(TransferRequest&& other) noexcept;
  TransferRequest(const TransferRequest&) = delete;
  TransferRequest& operator=(const TransferRequest&) = delete;

  bool posted() const { return posted_; }
  TransferDirection direction() const { return direction_; }
  int peer() const { return peer_; }
  uint64_t tag() const { return tag_; }
  size_t bytes() const { return bytes_; }  // the size posted

  // The size of the message that arrived (at most bytes()); valid once a receive finished.
  size_t received_bytes() const { return received_bytes_; }

  // UCS_INPROGRESS while running, else how it ended. Does not progress the worker.
  ucs_status_t status();

 private:
  friend class Link;       // link.h: posts every request
  friend class Transport;  // cancels and abandons them when a wait fails

  // Records the outcome of posting: `result` is what ucp_tag_*_nbx returned.
  void start(std::shared_ptr<UcxWorker> worker, ucs_status_ptr_t result,
             TransferDirection direction, int peer, uint64_t tag, size_t bytes);
  // Asks UCX to cancel (effective for receives not yet matched; sends finish or fail on their own
  // or when their endpoint is force-closed).
  void cancel();
  // Gives an unfinished request back to UCX without waiting for it, marking it cancelled.
  void abandon();
  void release();

  std::shared_ptr<UcxWorker> worker_;  // keeps the worker (and context) alive while in flight
  void* ucx_request_ = nullptr;        // non-null while UCX still owns an unfinished request
  ucs_status_t status_ = UCS_OK;
  bool posted_ = false;
  TransferDirection direction_ = TransferDirection::kSend;
  int peer_ = -1;
  uint64_t tag_ = 0;
  size_t bytes_ = 0;
  size_t received_bytes_ = 0;
};

}  // namespace terse
