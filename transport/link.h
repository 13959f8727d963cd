// A point-to-point link to one peer: one UCX endpoint on a worker, and tagged non-blocking sends
// and receives of host memory with requests the caller polls, peer failure, and a close. It knows
// nothing of collectives, codecs or NCCL; the engine's Transport (transport.h) keeps a link per
// rank, and the ncclNet plugin (plugin/net/) one per send or receive communicator. The peer's
// worker address reaches it by whatever channel the caller has (the bootstrap rendezvous, or
// link_handshake.h).
//
// Two ways to place a link, because the two users need different things:
// - On a worker of its own (create()): the plugin. Receives match tags on the worker, so links
//   that share nothing cannot mistake each other's messages whatever tags NCCL's connections
//   use, and closing a link (or a dead peer) never touches another.
// - On a worker it shares with other links (the constructor): the engine. A rank talks to every
//   other rank of a communicator, and one worker per peer would multiply the progress calls and
//   event descriptors every wait goes through by the number of ranks; its tags carry the source
//   rank (tag_layout.h), so receives on the shared worker still match one peer only. The engine
//   keeps two such workers, the network one and a shared-memory one for ranks on this host
//   (transport.h says why).
// Links that share a worker share its tag matching: their tags must tell the peers apart.
//
// Thread safety is the caller's: one thread at a time per worker (the engine holds its
// communicator's lock) and, because the links of one context share its registration cache, one
// thread at a time per context (the plugin holds one lock around every call).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/result.h"
#include "transport/deadline.h"
#include "transport/transfer_request.h"
#include "transport/transport_settings.h"
#include "transport/ucx_context.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace terse {

class Link {
 public:
  // A link on a worker of its own on `context`; no endpoint until connect().
  static Result create(std::shared_ptr<UcxContext> context, std::unique_ptr<Link>* out);
  // A link on `worker`, shared with other links; no endpoint until connect().
  explicit Link(std::shared_ptr<UcxWorker> worker) : worker_(std::move(worker)) {}
  // A placeholder with no worker, for containers filled later: closed (is_open() false), and
  // nothing may be posted on it or progressed through it.
  Link() = default;
  // Move-only; a close still under way moves with the link.
  Link(Link&&) noexcept = default;
  Link& operator=(Link&&) noexcept = default;

  // The packed worker address the peer connects to.
  Result address(std::vector<uint8_t>* bytes) const { return worker_->address(bytes); }

  // Opens the endpoint to the peer's worker. `peer_id` only names the peer in messages. Returns
  // UCX's status as is, for the caller to word or act on: UCS_ERR_UNREACHABLE with kPeer means no
  // transport both sides allow can report peer failure.
  ucs_status_t connect(const std::vector<uint8_t>& peer_address, UcxErrorMode mode, int peer_id);
  // Whether the endpoint is open: connected, and not closed since (a forced close after a
  // failure leaves the peer unreachable through this link).
  bool is_open() const { return endpoint_.is_open(); }

  // Posts a tagged send of `pieces` (gathered in order into one message of their total size).
  // The pieces array and the bytes it points to must stay valid until the request finishes.
  // When UCX refuses the post, `*out` still records it, finished with UCX's error.
  Result send(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out);
  // Posts a receive of the message tagged exactly `tag`, scattered over `pieces` in order; a
  // shorter message fills a prefix. The same lifetime rule applies.
  Result recv(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out);
  // The same for one contiguous buffer (which may be null when `bytes` is 0).
  Result send(uint64_t tag, const void* buffer, size_t bytes, TransferRequest* out);
  Result recv(uint64_t tag, void* buffer, size_t bytes, TransferRequest* out);

  // One round of progress on the link's worker (every link on it); the number of events handled.
  unsigned progress() { return worker_->progress(); }

  // Asks UCX to cancel `transfer` (effective for a receive not yet matched).
  static void cancel(TransferRequest* transfer) { transfer->cancel(); }
  // Lets go of `transfer` without waiting, quietly: for a close that already cancelled or gave
  // up on it (the worker's destruction reclaims it).
  static void abandon(TransferRequest* transfer);

  // UCS_OK while the endpoint is healthy; UCX's error once it reported the peer failed (only with
  // UcxErrorMode::kPeer; with kNone the caller watches the peer itself).
  ucs_status_t peer_error() const { return endpoint_.error(); }

  // The size from which UCX sends this link's messages with rendezvous (ucx_protocol_info.h);
  // nullopt when closed or when UCX does not say.
  std::optional<size_t> rendezvous_threshold() const;

  // Closing, in steps, for a caller that closes many links at once and progresses their workers
  // itself. start_close() closes the endpoint (is_open() false from then on), flushing outstanding
  // sends unless `force`; a forced close needs kPeer, and completes the endpoint's outstanding
  // requests as cancelled once the worker progresses. close_pending() is true while UCX still
  // works on it. abandon_close() stops waiting for it: UCX finishes it, or the worker's
  // destruction reclaims it.
  void start_close(bool force);
  bool close_pending();
  void abandon_close() { close_request_.reset(); }

  // The whole close: start_close(force), then progressing the worker until the close finishes,
  // `deadline` passes or `give_up()` says the peer is gone (a flush to a dead peer on a kNone
  // endpoint would only end at the deadline). Returns false when it gave up: the worker's
  // destruction reclaims what remains.
  bool close(bool force, const Deadline& deadline, const std::function<bool()>& give_up);

 private:
  struct FreeRequest {
    void operator()(void* request) const { ucp_request_free(request); }
  };
  Result post(bool is_send, uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
              TransferRequest* out);

  // The order matters to the defaulted moves and the destructor: the close request is freed, and
  // the endpoint force-closed, while a worker they live on is still held.
  std::shared_ptr<UcxWorker> worker_;
  std::unique_ptr<void, FreeRequest> close_request_;  // UCX's request for a close under way
  UcxEndpoint endpoint_;
  int peer_id_ = -1;
};

}  // namespace terse
