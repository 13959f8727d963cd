// A point-to-point link to one peer: a UCX worker of its own on a shared context, one endpoint,
// and tagged non-blocking sends and receives of host memory with requests the caller polls. It
// knows nothing of collectives, codecs or NCCL: the ncclNet plugin (plugin/net/) runs one per
// send or receive communicator, and the peer's worker address reaches it by whatever channel the
// caller has (link_handshake.h).
//
// Why a worker per link: receives match tags on the worker, so links that share nothing cannot
// mistake each other's messages, and closing a link (or a dead peer) never touches another.
// Thread safety is the caller's: one thread at a time per link, and, because the links of one
// context share its registration cache, one thread at a time per context (the plugin holds one
// lock around every call).
#pragma once

#include <nccl.h>
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transport/deadline.h"
#include "transport/transfer_request.h"
#include "transport/transport_settings.h"
#include "transport/ucx_context.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace terse {

class Link {
 public:
  // A worker on `context`; no endpoint until connect().
  static ncclResult_t create(std::shared_ptr<UcxContext> context, std::unique_ptr<Link>* out);

  // The packed worker address the peer connects to.
  ncclResult_t address(std::vector<uint8_t>* bytes) const { return worker_->address(bytes); }

  // Opens the endpoint to the peer's worker. `peer_id` only names the peer in messages.
  ncclResult_t connect(const std::vector<uint8_t>& peer_address, UcxErrorMode mode, int peer_id);

  // Posts a tagged send of `pieces` (gathered in order into one message of their total size).
  // The pieces array and the bytes it points to must stay valid until the request finishes.
  ncclResult_t send(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out);
  // Posts a receive of the message tagged exactly `tag`, scattered over `pieces` in order; a
  // shorter message fills a prefix. The same lifetime rule applies.
  ncclResult_t recv(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out);

  // One round of progress; the number of events handled.
  unsigned progress() { return worker_->progress(); }

  // Asks UCX to cancel `transfer` (effective for a receive not yet matched).
  static void cancel(TransferRequest* transfer) { transfer->cancel(); }
  // Lets go of `transfer` without waiting, quietly: for a close that already cancelled or gave
  // up on it (the worker's destruction reclaims it).
  static void abandon(TransferRequest* transfer);

  // UCS_OK while the endpoint is healthy; UCX's error once it reported the peer failed (only with
  // UcxErrorMode::kPeer; with kNone the caller watches the peer itself).
  ucs_status_t peer_error() const { return endpoint_.error(); }

  // Closes the endpoint, flushing outstanding sends unless `force` (a forced close needs kPeer),
  // progressing until the close finishes, `deadline` passes or `give_up()` says the peer is gone
  // (a flush to a dead peer on a kNone endpoint would only end at the deadline). Returns false
  // when it gave up: the worker's destruction reclaims what remains.
  bool close(bool force, const Deadline& deadline, const std::function<bool()>& give_up);

 private:
  explicit Link(std::shared_ptr<UcxWorker> worker) : worker_(std::move(worker)) {}
  ncclResult_t post(bool is_send, uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
                    TransferRequest* out);

  std::shared_ptr<UcxWorker> worker_;
  UcxEndpoint endpoint_;
  int peer_id_ = -1;
};

}  // namespace terse
