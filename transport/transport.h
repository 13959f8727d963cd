// One rank's transport for one communicator: its UCX contexts and workers, a link (link.h) to
// every rank (itself included) for tagged nonblocking send/receive of host buffers, waits with
// deadlines, and the small control collectives (barrier, allgather) the layers above need for
// setup.
//
// Threading: every call except interrupt() must come from one thread at a time, holding the
// owner's lock once enable_idle_progress() was called (the workers run in
// UCS_THREAD_MODE_SERIALIZED); different ranks' transports are independent and may run on
// different threads of one process.
//
// Failure model: a wait that cannot finish (peer died, request failed, TERSE_TIMEOUT_S passed,
// interrupt()) returns Result::kRemoteError naming the peer and the operation, after cancelling
// what it waited for, so no request outlives it with the caller's buffer. Endpoints to peers that
// had to be force-closed for that stay closed: the communicator is then broken, as NCCL's is after
// an error, and should be aborted. How soon a dead peer is noticed depends on
// TERSE_UCX_ERROR_MODE (transport_settings.h): UCX reports it at once on `peer` endpoints; on
// `none` endpoints (shared memory, by default between ranks on one host) the transport notices
// within kLivenessCheckInterval that the peer's process is gone, and a peer it cannot watch is
// caught at the deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/deadline.h"
#include "transport/idle_progress.h"
#include "transport/link.h"
#include "transport/process_identity.h"
#include "transport/transfer_request.h"
#include "transport/ucx_context.h"
#include "transport/ucx_worker.h"
#include "transport/unique_id.h"

namespace terse {

class Transport {
 public:
  // Creates this rank's UCX context and worker, joins the bootstrap rendezvous named by `id`
  // (exchanging worker addresses and host identities with every rank) and connects a link
  // to every rank. Collective: all `nranks` ranks call it with the same id. nranks is limited to
  // kMaxTaggedRanks (65536) by the tag layout.
  static Result create(const UniqueId& id, int rank, int nranks, std::unique_ptr<Transport>* out);

  // The same with the peers' setup data (worker addresses, host identities) exchanged by
  // `exchange` instead of the bootstrap rendezvous: wrap mode (plugin/comm_mode.h) allgathers it
  // through the real NCCL's communicator. `exchange` takes this rank's bytes and returns every
  // rank's in rank order; `communicator` is the tag layout's communicator field, equal on every
  // rank.
  using PeerExchange = std::function<Result(const std::vector<uint8_t>& mine,
                                            std::vector<std::vector<uint8_t>>* table)>;
  static Result create(const PeerExchange& exchange, uint16_t communicator, int rank, int nranks,
                       std::unique_ptr<Transport>* out);

  // close() unless already closed or aborted.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Messages up to this size to a rank on this host (through the shared-memory worker) travel
  // in UCX's eager protocol: the sender copies them into the receiver's shared-memory FIFO and
  // the receiver copies them out, both at memory speed. Larger ones use rendezvous, where the
  // receiver reads the sender's buffer with one cma copy (process_vm_readv), which pins every
  // page on each call and moves 4x slower than memcpy (perf/RESULTS.md, issue 11). Algorithms
  // that pipeline on one host cut their pieces to this size. UCX_RNDV_THRESH overrides it.
  static constexpr size_t kSharedMemoryEagerBytes = size_t{256} << 10;
  // Messages up to this size to a rank on another host travel eagerly when the network is TCP
  // (no usable RDMA port, or UCX_TLS leaves UCX none). UCX's own choice there is a rendezvous
  // from about 8-20 KiB, whose handshake is a round trip: behind a slow link's full queue it
  // waits for the data queued ahead of it, and algorithms that keep several peers busy at once
  // stall on it (int8 sra on 4 emulated nodes at 1 Gbit/s: 279 ms with rendezvous pieces, 231 ms
  // eager; perf/RESULTS.md, issue 11). The compressed algorithms' pieces fit (256 KiB of fp32
  // input, its encoding on the wire), their receives posted before the sends; the dense ring's
  // 1 MiB pieces still go by rendezvous, a round trip per MiB. Over RDMA UCX keeps its own
  // choice (its rendezvous is a zero-copy read); UCX_RNDV_THRESH overrides either.
  static constexpr size_t kTcpEagerBytes = size_t{256} << 10;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // The tag layout's communicator field for this communicator (derived from the unique id).
  uint16_t communicator() const { return communicator_; }
  // Equal for two ranks exactly when they run on the same host (host_identity.h).
  const std::string& host_identity(int rank) const { return host_identities_[rank]; }
  // Which process `rank` is (process_identity.h): ranks with equal process spaces run on one
  // operating-system instance, whatever TERSE_HOSTID says.
  const ProcessIdentity& process(int rank) const { return processes_[static_cast<size_t>(rank)]; }
  // TERSE_TIMEOUT_S as read at creation.
  double timeout_seconds() const { return timeout_seconds_; }
  // A deadline TERSE_TIMEOUT_S from now.
  Deadline default_deadline() const { return Deadline::after_seconds(timeout_seconds_); }

  // Posts a tagged send of `bytes` bytes to `peer` (any rank, this one included) and a receive
  // of at most `bytes` bytes from `peer`. `operation` goes into the tag (tag_layout.h,
  // make_operation); a receive matches only the message `peer` sent with the same operation.
  // `buffer` may be null when `bytes` is 0. `*request` must not hold an unfinished transfer.
  Result send(int peer, uint32_t operation, const void* buffer, size_t bytes,
              TransferRequest* request);
  Result recv(int peer, uint32_t operation, void* buffer, size_t bytes, TransferRequest* request);

  // Progresses until every request finished. On failure or at `deadline` cancels the rest and
  // returns Result::kRemoteError (Result::kInvalidUsage when a message was longer than its receive
  // buffer), with a message naming the peer, direction and operation.
  Result wait(TransferRequest* requests, size_t count, const Deadline& deadline);
  Result wait(std::vector<TransferRequest>* requests) {
    return wait(requests->data(), requests->size(), default_deadline());
  }

  // The size from which a message to a rank on another host goes with UCX's rendezvous protocol,
  // one round trip more than an eager message (ucx_protocol_info.h), as UCX chose it for the
  // first such rank's endpoint (others may differ where UCX chooses by each lane's speed); when
  // UCX does not say, the size the network context was configured with. nullopt with no rank on
  // another host, or when neither is known.
  std::optional<size_t> network_rendezvous_threshold() const;

  // Bytes of every data message this rank posted for sending to another rank (control messages
  // and messages to itself excluded) since creation: what the statistics call wire bytes.
  // Thread-safe: another thread may watch it (a test that must know a call is under way).
  uint64_t bytes_sent() const { return bytes_sent_.load(); }

  // One round of UCX progress, for callers that overlap work with communication; the events
  // handled.
  unsigned progress() { return progress_workers(); }
  // For a thread that serves requests on a transport of its own (ps/: it cannot block in wait()
  // for one request while others arrive): sleeps until a worker has an event, at most `max_ms`
  // (negative: no limit), or until `wake_fd` (an eventfd another thread writes; -1: none) is
  // readable, so work handed over from another thread does not wait for a timeout.
  void wait_for_event(int max_ms, int wake_fd = -1) {
    UcxWorker::sleep_until_event(active_workers_, max_ms, wake_fd, &poll_entries_);
  }
  // Asks UCX to cancel a posted request without letting go of it: a receive not yet matched ends
  // cancelled at the next progress; one already matched (or a send) ends on its own, so its
  // buffer must stay until status() says it finished.
  void cancel(TransferRequest* request) { request->cancel(); }
  // The same thread's check of a peer without waiting: true once UCX reported the endpoint to
  // `peer` failed or, for a watched peer (a process on this host), its process has exited.
  bool peer_failed(int peer) const {
    return links_[peer].peer_error() != UCS_OK || peer_process_gone(peer);
  }

  // Control collectives over the same links, tagged apart from data operations (the tag's
  // control bit and a sequence of their own). Every rank must call them in the same order.
  // barrier: dissemination, ceil(log2 nranks) rounds of empty messages.
  Result barrier();
  // allgather: every rank contributes `bytes` bytes; `all` receives nranks * bytes in rank
  // order. A ring, nranks - 1 steps: meant for small setup data, not for tensors. A rank that
  // passes a different size fails with Result::kInvalidUsage.
  Result allgather(const void* mine, size_t bytes, void* all);
  // broadcast_among: `root` sends `bytes` bytes of `data` to every other rank of `members` (this
  // rank among them); ranks outside `members` take no part and may be dead (ncclCommShrink). The
  // members must call it alike, in the same order as their other control collectives; a
  // transport where some ranks did is then out of step with the others for barrier/allgather.
  Result broadcast_among(const std::vector<int>& members, int root, void* data, size_t bytes);

  // From now on a thread progresses the workers whenever `owner_lock` is free (idle_progress.h:
  // a peer's rendezvous send to this rank must finish even when this rank makes no more calls
  // for a while). Every later call on this transport must hold `owner_lock`; close() and abort()
  // stop the thread first.
  void enable_idle_progress(std::mutex* owner_lock);

  // Thread-safe: makes the current and every later wait() fail at once with Result::kRemoteError
  // (how an abort from another thread unblocks the rank's thread).
  void interrupt() { interrupted_.store(true); }
  // Lets waits run again after interrupt(), once the interrupted call has returned (the
  // caller's lock says so): ncclCommRevoke leaves a communicator usable for split and shrink.
  void clear_interrupt() { interrupted_.store(false); }

  // Closes every endpoint, flushing what was sent; bounded by TERSE_TIMEOUT_S, after which the
  // remaining endpoints are released unflushed. Outstanding requests should have been waited.
  void close();
  // Force-closes every endpoint at once (outstanding requests complete as cancelled) and always
  // returns within about a second, whatever the peers do.
  void abort();

 private:
  Transport() = default;
  Result connect_links(const std::vector<std::vector<uint8_t>>& table, UcxErrorModeSetting setting);
  // One round of progress on every worker that has links; the events handled.
  unsigned progress_workers();
  // An idle wait's sleep on every worker that has links (UcxWorker::sleep_until_event).
  void sleep_until_event(int max_ms) {
    UcxWorker::sleep_until_event(active_workers_, max_ms, -1, &poll_entries_);
  }
  // Whether `peer` is a watched process (watched_) that has exited.
  bool peer_process_gone(int peer) const;
  // How often waits and closes ask that (a /proc read per peer): rarely enough to cost nothing
  // next to the transfers.
  static constexpr std::chrono::milliseconds kLivenessCheckInterval{50};
  Result post_send(int peer, uint32_t operation, const void* buffer, size_t bytes,
                   TransferRequest* request);
  Result post_recv(int peer, uint32_t operation, void* buffer, size_t bytes,
                   TransferRequest* request);
  enum class Direction { kSend, kReceive };
  Result check_peer(int peer, Direction direction) const;
  // wait()'s failure path: leaves every request finished, force-closing endpoints if needed.
  void cancel_unfinished(TransferRequest* requests, size_t count);
  void close_links(bool force, const Deadline& deadline);
  std::string describe(const TransferRequest& request) const;

  int rank_ = 0;
  int nranks_ = 0;
  std::atomic<uint64_t> bytes_sent_{0};
  uint16_t communicator_ = 0;
  double timeout_seconds_ = 0;
  // The network worker (every transport UCX_TLS allows) and, unless UCX_TLS is set or
  // TERSE_UCX_ERROR_MODE=peer, a worker of its own context restricted to shared memory for the
  // ranks on this host: UCX 1.13 otherwise adds the TCP loopback lane to their rendezvous
  // traffic, which halves their bandwidth. The links share these two workers (link.h says why
  // not one each).
  std::shared_ptr<UcxContext> context_;
  std::shared_ptr<UcxWorker> worker_;
  std::shared_ptr<UcxContext> local_context_;
  std::shared_ptr<UcxWorker> local_worker_;
  std::vector<UcxWorker*> active_workers_;       // those with links; what waits progress
  std::vector<Link> links_;                      // by rank
  std::optional<size_t> configured_rendezvous_;  // network_rendezvous_threshold's fallback
  std::vector<std::string> host_identities_;
  std::vector<ProcessIdentity> processes_;  // by rank
  // By rank: true for peers reached with UcxErrorMode::kNone whose process this one can see,
  // so that their death is found by asking the kernel rather than at the deadline.
  std::vector<bool> watched_;
  uint32_t control_sequence_ = 0;
  std::atomic<bool> interrupted_{false};
  bool closed_ = false;
  // The poll set of sleep_until_event, kept so that no sleep allocates (room for every worker
  // and a wake-up descriptor from connect_links on).
  std::vector<pollfd> poll_entries_;
  // Last: stopped (joined) before anything above goes away.
  std::unique_ptr<IdleProgress> idle_progress_;
};

}  // namespace terse
