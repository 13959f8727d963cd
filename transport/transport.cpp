#include "transport/transport.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/exception_guard.h"
#include "common/log.h"
#include "common/result.h"
#include "topology/link_model.h"
#include "topology/local_topology.h"
#include "transport/bootstrap_client.h"
#include "transport/host_identity.h"
#include "transport/nic_binding.h"
#include "transport/peer_info.h"
#include "transport/tag_layout.h"
#include "transport/transport_settings.h"
#include "transport/ucx_protocol_info.h"

namespace terse {
namespace {

// The shared-memory worker's transports: shared memory (posix, sysv, cma) and loopback to self.
constexpr const char* kLocalTransports = "sm,self";

// The shared-memory worker's UCX settings, unless the environment sets them
// (Transport::kSharedMemoryEagerBytes says why): messages up to kSharedMemoryEagerBytes go in
// UCX's eager protocol (in fragments of the shared-memory FIFO's segment size, 8 KiB).
const std::vector<UcxContext::Setting>& local_settings() {
  static const std::string threshold = std::to_string(Transport::kSharedMemoryEagerBytes + 1);
  static const std::vector<UcxContext::Setting> settings = {{"RNDV_THRESH", threshold.c_str()}};
  return settings;
}

// The network worker's UCX settings (Transport::kTcpEagerBytes says why): over TCP, messages up
// to kTcpEagerBytes go eagerly. None when UCX_RNDV_THRESH is set (the user's choice), when UCX
// may use a usable RDMA port, or when the topology is a TERSE_TOPO_FILE, which may describe
// another machine: UCX then keeps its own choice. UCX_TLS is asked first, so a TCP-only job
// loads no topology here.
std::vector<UcxContext::Setting> network_settings() {
  if (getenv("UCX_RNDV_THRESH") != nullptr) return {};
  if (ucx_tls_allows_rdma(getenv("UCX_TLS"))) {
    const MachineTopology* topology = local_topology();
    if (topology == nullptr || !topology->live || ucx_network_uses_rdma(topology)) return {};
  }
  static const std::string threshold = std::to_string(Transport::kTcpEagerBytes + 1);
  return {{"RNDV_THRESH", threshold.c_str()}};
}

// The rendezvous size the network context was configured with, for when UCX's own account of an
// endpoint cannot be read: terse's setting, else UCX_RNDV_THRESH's size; nullopt for UCX's
// automatic choice.
std::optional<size_t> configured_rendezvous(const std::vector<UcxContext::Setting>& settings) {
  if (!settings.empty()) return Transport::kTcpEagerBytes + 1;
  const char* value = getenv("UCX_RNDV_THRESH");
  return value == nullptr ? std::nullopt : parse_ucx_size(value);
}

// abort() must return promptly whatever the peers do; a forced close needs no peer, so this only
// bounds UCX's local clean-up.
constexpr double kAbortSeconds = 1.0;

Result check_rank_arguments(int rank, int nranks) {
  if (nranks < 1 || nranks > kMaxTaggedRanks) {
    return fail(Result::kInvalidArgument, "nranks %d is out of range (1 to %d)", nranks,
                kMaxTaggedRanks);
  }
  if (rank < 0 || rank >= nranks) {
    return fail(Result::kInvalidArgument, "rank %d is out of range for nranks %d (0 to %d)", rank,
                nranks, nranks - 1);
  }
  return Result::kSuccess;
}

}  // namespace

Result Transport::create(const UniqueId& id, int rank, int nranks,
                         std::unique_ptr<Transport>* out) {
  if (out == nullptr) return fail(Result::kInvalidArgument, "transport output pointer is NULL");
  TERSE_CHECK(check_rank_arguments(rank, nranks));
  UniqueIdFields fields;
  TERSE_CHECK(decode_unique_id(id, &fields));
  double timeout_seconds = 0;
  TERSE_CHECK(transport_timeout_seconds(&timeout_seconds));
  const PeerExchange rendezvous = [&](const std::vector<uint8_t>& mine,
                                      std::vector<std::vector<uint8_t>>* table) {
    return bootstrap_allgather(id, rank, nranks, mine, timeout_seconds, table);
  };
  return create(rendezvous, communicator_tag_id(fields.secret), rank, nranks, out);
}

Result Transport::create(const PeerExchange& exchange, uint16_t communicator, int rank, int nranks,
                         std::unique_ptr<Transport>* out) {
  if (out == nullptr) return fail(Result::kInvalidArgument, "transport output pointer is NULL");
  TERSE_CHECK(check_rank_arguments(rank, nranks));
  std::unique_ptr<Transport> transport(new Transport());
  transport->rank_ = rank;
  transport->nranks_ = nranks;
  transport->communicator_ = communicator;
  TERSE_CHECK(transport_timeout_seconds(&transport->timeout_seconds_));
  UcxErrorModeSetting error_mode = UcxErrorModeSetting::kAuto;
  TERSE_CHECK(ucx_error_mode(&error_mode));
  // This rank's NIC on a node with several (nic_binding.h); said once per process.
  std::string nic_reason;
  const std::string net_devices = net_devices_for_this_process(&nic_reason);
  static std::once_flag nic_logged;
  std::call_once(nic_logged, [&] {
    TERSE_INFO("transport: network devices %s (%s)",
               net_devices.empty() ? "as UCX chooses" : net_devices.c_str(), nic_reason.c_str());
  });
  const std::vector<UcxContext::Setting> settings = network_settings();
  transport->configured_rendezvous_ = configured_rendezvous(settings);
  TERSE_CHECK(UcxContext::create(nranks, nullptr, &transport->context_, net_devices, settings));
  TERSE_CHECK(UcxWorker::create(transport->context_, &transport->worker_));
  // Every buffer terse hands UCX is host memory, and each request says so (post_send,
  // post_recv): device-buffer collectives are staged, and the device backend copies its encoded
  // messages into pinned host memory. Where UCX takes CUDA memory those messages could stay on
  // the device; terse does not do that yet, so the answer is only reported.
  static std::once_flag memory_logged;
  std::call_once(memory_logged, [&] {
    TERSE_INFO(
        "transport: UCX %s CUDA device memory; messages of device-buffer collectives go "
        "through pinned host memory (declared UCS_MEMORY_TYPE_HOST)",
        transport->context_->supports_cuda_memory() ? "supports" : "does not support");
  });
  if (error_mode != UcxErrorModeSetting::kPeer && getenv("UCX_TLS") == nullptr) {
    // Best effort: without it, ranks on this host use the network worker.
    if (UcxContext::create(nranks, kLocalTransports, &transport->local_context_, std::string(),
                           local_settings()) != Result::kSuccess ||
        UcxWorker::create(transport->local_context_, &transport->local_worker_) !=
            Result::kSuccess) {
      TERSE_INFO("transport: no shared-memory worker (%s); ranks on this host use the network one",
                 last_error());
      transport->local_worker_.reset();
      transport->local_context_.reset();
    }
  }

  PeerInfo mine;
  mine.host_identity = ::terse::host_identity();
  mine.process = this_process();
  TERSE_CHECK(transport->worker_->address(&mine.worker_address));
  if (transport->local_worker_ != nullptr) {
    TERSE_CHECK(transport->local_worker_->address(&mine.local_worker_address));
  }
  std::vector<std::vector<uint8_t>> table;
  Result result = exchange(encode_peer_info(mine), &table);
  if (result == Result::kSuccess && table.size() != static_cast<size_t>(nranks)) {
    result =
        fail(Result::kInternalError, "rank %d: the address exchange returned %zu ranks, not %d",
             rank, table.size(), nranks);
  }
  if (result == Result::kSuccess) result = transport->connect_links(table, error_mode);
  // Opening a shared-memory endpoint attaches the peer's segment at once: no rank may return
  // (and perhaps destroy its worker, removing its segment) before every rank has connected its
  // links. Completing a dissemination barrier means every rank has entered it.
  if (result == Result::kSuccess) result = transport->barrier();
  if (result != Result::kSuccess) {
    transport->abort();
    return result;
  }
  TERSE_INFO("transport: rank %d of %d connected (communicator 0x%04x, host %s)", rank, nranks,
             transport->communicator_, mine.host_identity.c_str());
  *out = std::move(transport);
  return Result::kSuccess;
}

Result Transport::connect_links(const std::vector<std::vector<uint8_t>>& table,
                                UcxErrorModeSetting setting) {
  links_.resize(nranks_);
  host_identities_.resize(nranks_);
  processes_.resize(nranks_);
  watched_.assign(nranks_, false);
  // Every worker until the links are known (a failure below still progresses them all while
  // closing); trimmed to the workers in use at the end.
  active_workers_ = {worker_.get()};
  if (local_worker_ != nullptr) active_workers_.push_back(local_worker_.get());
  bool network_used = false, local_used = false;
  const ProcessIdentity me = this_process();
  const std::string my_host = ::terse::host_identity();
  for (int peer = 0; peer < nranks_; ++peer) {
    PeerInfo info;
    TERSE_CHECK(decode_peer_info(table[peer], peer, &info));
    // Same host (by host identity, which TERSE_HOSTID may split, e.g. for emulated nodes behind
    // a rate-limited link) and a process this one can watch: shared memory is allowed.
    const bool watchable = peer != rank_ && shares_process_space(me, info.process);
    const bool on_this_host = peer == rank_ || (watchable && info.host_identity == my_host);
    host_identities_[peer] = std::move(info.host_identity);
    processes_[peer] = info.process;
    UcxErrorMode mode = UcxErrorMode::kPeer;
    if (setting == UcxErrorModeSetting::kNone ||
        (setting == UcxErrorModeSetting::kAuto && on_this_host)) {
      // Shared memory cannot report a dead peer, but the kernel can tell whether its process
      // still exists (wait() asks it).
      mode = UcxErrorMode::kNone;
    }
    // Both sides decide alike (the relation is symmetric and both know whether the other has a
    // shared-memory worker).
    const bool local = mode == UcxErrorMode::kNone && on_this_host && local_worker_ != nullptr &&
                       !info.local_worker_address.empty();
    Link& link = links_[peer];
    if (local) {
      link = Link(local_worker_);
      ucs_status_t status = link.connect(info.local_worker_address, mode, peer);
      if (status != UCS_OK) {
        return fail(Result::kSystemError,
                    "rank %d: UCX cannot create a shared-memory endpoint to rank %d: %s", rank_,
                    peer, ucs_status_string(status));
      }
      watched_[peer] = watchable;
      local_used = true;
      continue;
    }
    // Creating an endpoint only records the address; UCX connects on first use.
    link = Link(worker_);
    ucs_status_t status = link.connect(info.worker_address, mode, peer);
    if (status == UCS_ERR_UNREACHABLE && mode == UcxErrorMode::kPeer) {
      // UCX 1.13 refuses peer-failure reporting over shared memory alone (UCX_TLS=shm): fall
      // back for every endpoint rather than fail, keeping the deadline as the safety net.
      TERSE_INFO(
          "rank %d: UCX_TLS=%s offers no transport that reports peer failure; endpoints "
          "use UCP_ERR_HANDLING_MODE_NONE, so a dead peer is noticed at the "
          "TERSE_TIMEOUT_S deadline",
          rank_, env_string("UCX_TLS", "(unset)").c_str());
      mode = UcxErrorMode::kNone;
      status = link.connect(info.worker_address, mode, peer);
    }
    watched_[peer] = watchable && mode == UcxErrorMode::kNone;
    if (status != UCS_OK) {
      return fail(Result::kSystemError,
                  "rank %d: UCX cannot create an endpoint to rank %d (%zu-byte worker address): "
                  "%s; do the ranks allow a common transport (UCX_TLS=%s)?",
                  rank_, peer, info.worker_address.size(), ucs_status_string(status),
                  env_string("UCX_TLS", "(unset)").c_str());
    }
    network_used = true;
  }
  active_workers_.clear();
  if (network_used) active_workers_.push_back(worker_.get());
  if (local_used) active_workers_.push_back(local_worker_.get());
  poll_entries_.reserve(active_workers_.size() + 1);  // and a wake-up descriptor
  return Result::kSuccess;
}

std::optional<size_t> Transport::network_rendezvous_threshold() const {
  for (int peer = 0; peer < nranks_; ++peer) {
    if (host_identities_[peer] == host_identities_[rank_]) continue;
    const std::optional<size_t> threshold = links_[peer].rendezvous_threshold();
    return threshold ? threshold : configured_rendezvous_;
  }
  return std::nullopt;
}

unsigned Transport::progress_workers() {
  unsigned events = 0;
  for (UcxWorker* worker : active_workers_) events += worker->progress();
  return events;
}

Transport::~Transport() {
  idle_progress_.reset();
  if (!closed_) close();
}

Result Transport::check_peer(int peer, Direction direction_kind) const {
  const char* direction = direction_kind == Direction::kSend ? "send to" : "receive from";
  if (closed_) {
    return fail(Result::kInvalidUsage, "rank %d: cannot %s rank %d: the transport is closed", rank_,
                direction, peer);
  }
  if (peer < 0 || peer >= nranks_) {
    return fail(Result::kInvalidArgument, "rank %d: cannot %s rank %d: peer out of range (0 to %d)",
                rank_, direction, peer, nranks_ - 1);
  }
  const Link& link = links_[peer];
  // A receive is posted on the worker, not the endpoint: a peer that sent its data and then
  // closed (its endpoint error is how UCX reports the close) may still have a message queued
  // here, so receives are posted anyway and wait() decides.
  if (direction_kind == Direction::kSend && link.peer_error() != UCS_OK) {
    return fail(Result::kRemoteError,
                "rank %d: cannot %s rank %d: UCX reported that peer failed (%s)", rank_, direction,
                peer, ucs_status_string(link.peer_error()));
  }
  if (!link.is_open()) {
    return fail(Result::kRemoteError,
                "rank %d: cannot %s rank %d: its endpoint was closed after an earlier failure",
                rank_, direction, peer);
  }
  return Result::kSuccess;
}

Result Transport::send(int peer, uint32_t operation, const void* buffer, size_t bytes,
                       TransferRequest* request) {
  if (is_control_operation(operation)) {
    return fail(Result::kInvalidArgument,
                "operation 0x%08x has the control bit set, which the transport reserves for its "
                "own barrier and allgather",
                operation);
  }
  const Result result = post_send(peer, operation, buffer, bytes, request);
  if (result == Result::kSuccess && peer != rank_) bytes_sent_ += bytes;
  return result;
}

Result Transport::recv(int peer, uint32_t operation, void* buffer, size_t bytes,
                       TransferRequest* request) {
  if (is_control_operation(operation)) {
    return fail(Result::kInvalidArgument,
                "operation 0x%08x has the control bit set, which the transport reserves for its "
                "own barrier and allgather",
                operation);
  }
  return post_recv(peer, operation, buffer, bytes, request);
}

namespace {

Result check_buffer(const void* buffer, size_t bytes, TransferRequest* request) {
  if (request == nullptr) return fail(Result::kInvalidArgument, "transfer request pointer is NULL");
  if (buffer == nullptr && bytes > 0) {
    return fail(Result::kInvalidArgument, "buffer is NULL but %zu bytes were asked for", bytes);
  }
  if (request->posted() && request->status() == UCS_INPROGRESS) {
    return fail(Result::kInvalidUsage, "the transfer request still holds an unfinished %s rank %d",
                request->direction() == TransferDirection::kSend ? "send to" : "receive from",
                request->peer());
  }
  return Result::kSuccess;
}

}  // namespace

Result Transport::post_send(int peer, uint32_t operation, const void* buffer, size_t bytes,
                            TransferRequest* request) {
  TERSE_CHECK(check_buffer(buffer, bytes, request));
  TERSE_CHECK(check_peer(peer, Direction::kSend));
  const uint64_t tag = make_tag(communicator_, operation, static_cast<uint16_t>(rank_));
  return links_[peer].send(tag, buffer, bytes, request);
}

Result Transport::post_recv(int peer, uint32_t operation, void* buffer, size_t bytes,
                            TransferRequest* request) {
  TERSE_CHECK(check_buffer(buffer, bytes, request));
  TERSE_CHECK(check_peer(peer, Direction::kReceive));
  // The source rank is part of the tag, and the link matches the whole tag, so the receive is
  // source-specific on a worker other links share.
  const uint64_t tag = make_tag(communicator_, operation, static_cast<uint16_t>(peer));
  return links_[peer].recv(tag, buffer, bytes, request);
}

std::string Transport::describe(const TransferRequest& request) const {
  TagFields fields = split_tag(request.tag());
  char text[256];
  snprintf(text, sizeof(text),
           "%s of %zu bytes %s rank %d (communicator 0x%04x, %soperation %u step %u)",
           request.direction() == TransferDirection::kSend ? "send" : "receive", request.bytes(),
           request.direction() == TransferDirection::kSend ? "to" : "from", request.peer(),
           fields.communicator, is_control_operation(fields.operation) ? "control " : "",
           operation_sequence(fields.operation), operation_step(fields.operation));
  return text;
}

void Transport::close_links(bool force, const Deadline& deadline) {
  std::vector<int> closing;  // peers whose close is under way
  for (int peer = 0; peer < static_cast<int>(links_.size()); ++peer) {
    links_[peer].start_close(force);
    if (links_[peer].close_pending()) closing.push_back(peer);
  }
  auto next_liveness_check = Deadline::Clock::now();
  while (!closing.empty()) {
    progress_workers();
    const auto now = Deadline::Clock::now();
    const bool check_liveness = now >= next_liveness_check;
    if (check_liveness) next_liveness_check = now + kLivenessCheckInterval;
    for (size_t i = 0; i < closing.size();) {
      Link& link = links_[closing[i]];
      // Flushing to a process that has exited would only end at the deadline.
      if (link.close_pending() && !(check_liveness && peer_process_gone(closing[i]))) {
        ++i;
        continue;
      }
      link.abandon_close();
      closing.erase(closing.begin() + i);
    }
    // An abort from another thread ends a flush too (abort() then closes by force).
    if (closing.empty() || deadline.expired() || interrupted_.load()) break;
    sleep_until_event(deadline.poll_timeout_ms(1));
  }
  for (int peer : closing) {
    TERSE_WARN(
        "rank %d: closing the endpoint to rank %d did not finish in time; releasing it "
        "unflushed",
        rank_, peer);
    links_[peer].abandon_close();
  }
  // A forced close finishes the endpoint's outstanding requests (as cancelled) from callbacks
  // that progress runs; drain them so that callers find their requests finished.
  while (!deadline.expired() && progress_workers() != 0) {
  }
}

void Transport::enable_idle_progress(std::mutex* owner_lock) {
  if (closed_ || active_workers_.empty()) return;
  idle_progress_ = std::make_unique<IdleProgress>(active_workers_, owner_lock);
}

// close() and abort() run from destructors: out of memory while tracking the links'
// closes leaves them to the worker's destruction instead of ending the process.
void Transport::close() {
  idle_progress_.reset();
  if (closed_) return;
  (void)call_guarded("closing the transport", [&] {
    close_links(/*force=*/false, default_deadline());
    return Result::kSuccess;
  });
  closed_ = true;
}

void Transport::abort() {
  interrupted_.store(true);
  idle_progress_.reset();
  if (closed_) return;
  (void)call_guarded("aborting the transport", [&] {
    close_links(/*force=*/true, Deadline::after_seconds(kAbortSeconds));
    return Result::kSuccess;
  });
  closed_ = true;
}

}  // namespace terse
