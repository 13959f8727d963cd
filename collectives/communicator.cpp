// One rank's communicator (communicator.h): creation, error state, argument checks, running calls
// and groups, revoke, finalize and abort. Split and shrink are in communicator_split.cpp.
#include "collectives/communicator.h"

#include <chrono>

#include "collectives/agreed_settings.h"
#include "collectives/collective_traits.h"
#include "collectives/device_buffers.h"
#include "collectives/operation_numbers.h"
#include "collectives/settings_agreement.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

// Transport::wait with a deadline already past cancels whatever is unfinished (force-closing
// endpoints where a send cannot be cancelled), so no request outlives the call with a user's
// buffer; the first error stays the thread's last error.
void cancel_unfinished(Transport* transport, std::vector<TransferRequest>* requests,
                       ncclResult_t code) {
  const std::string first = last_error();
  transport->wait(requests->data(), requests->size(), Deadline::after_seconds(0));
  if (first != last_error()) fail(code, "%s", first.c_str());
}

}  // namespace

ncclResult_t Communicator::create(const UniqueId& id, int rank, int nranks, int cuda_device,
                                  std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "communicator output pointer is NULL");
  std::unique_ptr<Transport> transport;
  TERSE_CHECK(Transport::create(id, rank, nranks, &transport));
  return create_on(std::move(transport), cuda_device, out);
}

ncclResult_t Communicator::create(const Transport::PeerExchange& exchange, uint16_t communicator,
                                  int rank, int nranks, int cuda_device,
                                  std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "communicator output pointer is NULL");
  std::unique_ptr<Transport> transport;
  TERSE_CHECK(Transport::create(exchange, communicator, rank, nranks, &transport));
  return create_on(std::move(transport), cuda_device, out);
}

ncclResult_t Communicator::create_on(std::unique_ptr<Transport> transport, int cuda_device,
                                     std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->rank_ = transport->rank();
  comm->nranks_ = transport->nranks();
  comm->transport_ = std::move(transport);
  comm->cuda_device_ = cuda_device;
  // First, before any setting is read for use and before any collective: a rank whose settings
  // differ would run another algorithm and its peers would wait for it until the deadline, and
  // a rank that refused a typo of its own before the exchange would leave them waiting there.
  // Every rank reaches the same verdict from the same data, so a refused communicator is refused
  // everywhere; its transport then closes normally (flushing the exchange's last messages to
  // peers still reading them), unless the exchange itself failed and a peer may be gone.
  CommSettings settings;
  std::vector<AgreedSetting> compared;
  const ncclResult_t read = read_comm_settings(&settings, &compared);
  const std::string refusal = last_error();
  const ncclResult_t agreed = check_settings_agree(comm->transport_.get(), compared);
  if (agreed != ncclSuccess) {
    if (agreed != ncclInvalidUsage) comm->break_with(agreed);
    return agreed;
  }
  // Every rank holds the same values now: a value refused is refused on every rank alike.
  if (read != ncclSuccess) return restore_error(read, refusal.c_str());
  comm->selection_ = settings.selection;
  comm->piece_bytes_ = settings.piece_bytes;
  TERSE_CHECK(
      CompressionEngine::create(comm->transport_.get(), settings.compression, &comm->compression_));
  comm->sends_issued_.assign(static_cast<size_t>(comm->nranks_), 0);
  comm->receives_issued_.assign(static_cast<size_t>(comm->nranks_), 0);
  // Between calls a thread progresses the transport (a peer's rendezvous send to this rank needs
  // it); every call holds call_mutex_, which keeps that thread out meanwhile.
  comm->transport_->enable_idle_progress(&comm->call_mutex_);
  *out = std::move(comm);
  return ncclSuccess;
}

Communicator::~Communicator() {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (transport_ == nullptr || aborted_ || finalized_) return;
  // A broken communicator's peers may be dead: flushing to them would wait for the deadline.
  // So may a revoked one's (revoking is how a job stops talking to a dead rank).
  if (async_error_.load() != ncclSuccess || revoked_.load()) {
    transport_->abort();
  } else {
    transport_->close();
  }
}

std::string Communicator::async_error_message() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return async_error_message_;
}

void Communicator::break_with(ncclResult_t result) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (async_error_.load() != ncclSuccess) return;  // the first error explains the rest
  // A revoked communicator's calls fail by design (queued device calls among them): that is
  // not a new error, and revoking promised ncclSuccess from then on.
  if (revoked_.load()) return;
  async_error_message_ = last_error();
  async_error_.store(result);
}

ncclResult_t Communicator::check_arguments(const CollectiveArgs& args) const {
  const char* what = collective_name(args.kind);
  const size_t element_bytes = nccl_type_size(args.type);
  if (element_bytes == 0) {
    return fail(ncclInvalidArgument, "%s: datatype %d is not a valid ncclDataType_t", what,
                static_cast<int>(args.type));
  }
  if (has_root(args.kind) && (args.root < 0 || args.root >= nranks_)) {
    return fail(ncclInvalidArgument, "%s: root %d is out of range for a communicator of %d ranks",
                what, args.root, nranks_);
  }
  if (is_point_to_point(args.kind) && (args.peer < 0 || args.peer >= nranks_)) {
    return fail(ncclInvalidArgument, "%s: peer %d is out of range for a communicator of %d ranks",
                what, args.peer, nranks_);
  }
  const size_t blocks = blocks_per_buffer(args.kind, nranks_);
  if (args.count > SIZE_MAX / element_bytes / blocks) {
    return fail(ncclInvalidArgument,
                "%s: count %zu of %s (%zu bytes each, %zu blocks) overflows the byte count", what,
                args.count, nccl_type_name(args.type), element_bytes, blocks);
  }
  if (args.count > 0) {
    bool send = false, recv = false;
    buffers_used(args, rank_, &send, &recv);
    if (send && args.send == nullptr) {
      return fail(ncclInvalidArgument, "%s: sendbuff is NULL with count %zu", what, args.count);
    }
    if (recv && args.recv == nullptr) {
      return fail(ncclInvalidArgument, "%s: recvbuff is NULL with count %zu", what, args.count);
    }
  }
  return ncclSuccess;
}

ncclResult_t Communicator::check_usable() const {
  if (aborted_ || interrupted_.load()) {
    return fail(ncclInvalidUsage, "rank %d: the communicator was aborted", rank_);
  }
  if (finalized_) {
    return fail(ncclInvalidUsage, "rank %d: the communicator was finalized", rank_);
  }
  if (revoked_.load()) {
    return fail(ncclInvalidUsage,
                "rank %d: the communicator was revoked (ncclCommRevoke); only split, shrink, "
                "abort and destroy remain",
                rank_);
  }
  const ncclResult_t broken = async_error_.load();
  if (broken != ncclSuccess) {
    return fail(broken, "rank %d: the communicator failed earlier and must be aborted: %s", rank_,
                async_error_message().c_str());
  }
  return ncclSuccess;
}

ncclResult_t Communicator::check_manageable(const char* what, bool broken_ok) const {
  if (aborted_ || interrupted_.load()) {
    return fail(ncclInvalidUsage, "%s: rank %d: the communicator was aborted", what, rank_);
  }
  if (finalized_) {
    return fail(ncclInvalidUsage, "%s: rank %d: the communicator was finalized", what, rank_);
  }
  const ncclResult_t broken = async_error_.load();
  if (broken != ncclSuccess && !broken_ok) {
    return fail(broken, "%s: rank %d: the communicator failed earlier and must be aborted: %s",
                what, rank_, async_error_message().c_str());
  }
  return ncclSuccess;
}

AlgorithmContext Communicator::collective_context() {
  AlgorithmContext context;
  context.transport = transport_.get();
  context.sequence = collective_sequence(collectives_issued_++);
  context.deadline = transport_->default_deadline();
  context.piece_bytes = piece_bytes_;
  return context;
}

AlgorithmContext Communicator::point_to_point_context(const CollectiveArgs& args) {
  std::vector<uint64_t>& issued =
      args.kind == CollectiveKind::kSend ? sends_issued_ : receives_issued_;
  AlgorithmContext context;
  context.transport = transport_.get();
  context.sequence = point_to_point_sequence(issued[static_cast<size_t>(args.peer)]++);
  context.deadline = transport_->default_deadline();
  context.piece_bytes = piece_bytes_;
  return context;
}

ncclResult_t Communicator::run(const CollectiveArgs& args) {
  return run(args, nullptr);
}

ncclResult_t Communicator::run(const CollectiveArgs& args, const AlgorithmInfo* algorithm) {
  TERSE_CHECK(check_arguments(args));
  if (algorithm != nullptr && algorithm->kind != args.kind) {
    return fail(ncclInvalidArgument, "algorithm %s implements %s, not %s", algorithm->name,
                collective_name(algorithm->kind), collective_name(args.kind));
  }
  std::lock_guard<std::mutex> lock(call_mutex_);
  set_log_rank(rank_);  // this thread's log lines now show the rank it works for
  TERSE_CHECK(check_usable());
  return run_locked(args, algorithm);
}

ncclResult_t Communicator::run_locked(const CollectiveArgs& args, const AlgorithmInfo* algorithm) {
  // NCCL treats an empty send or receive as nothing to do, on both sides.
  if (is_point_to_point(args.kind) && args.count == 0) return ncclSuccess;
  // A caller that names a dense algorithm gets exactly that; otherwise allreduces ask the
  // compression policy first.
  const bool compressible = algorithm == nullptr && args.kind == CollectiveKind::kAllReduce;
  if (algorithm == nullptr) algorithm = selection_.choose(args, nranks_);
  if (algorithm == nullptr) {
    return fail(ncclInvalidUsage, "rank %d: no algorithm implements %s (known: %s)", rank_,
                collective_name(args.kind), algorithm_names().c_str());
  }
  const AlgorithmContext context =
      is_point_to_point(args.kind) ? point_to_point_context(args) : collective_context();
  if (compressible) {
    bool handled = false;
    const ncclResult_t result = compression_->allreduce(args, context, &handled);
    // A refused decision (a bad per-call codec) is the caller's error, the same on every rank;
    // a failure inside a compressed algorithm breaks the communicator like any other.
    if (handled && result != ncclSuccess) break_with(result);
    if (handled || result != ncclSuccess) return result;
  }
  TERSE_TRACE("rank %d: %s of %zu x %s with %s (operation sequence %u)", rank_,
              collective_name(args.kind), args.count, nccl_type_name(args.type), algorithm->name,
              context.sequence);
  const uint64_t sent_before = transport_->bytes_sent();
  const auto start = std::chrono::steady_clock::now();
  // Device buffers the compressed path did not take: the dense algorithms run on host memory
  // (device_buffers.h).
  CollectiveArgs host = args;
  ncclResult_t result = ncclSuccess;
  if (args.device != nullptr) result = args.device->stage_in(&host);
  if (result == ncclSuccess) result = algorithm->run(host, context);
  if (result == ncclSuccess && args.device != nullptr) result = args.device->stage_out();
  if (result != ncclSuccess) {
    break_with(result);
    return result;
  }
  if (args.kind == CollectiveKind::kAllReduce) {
    compression_->record_dense(
        args, algorithm->name, transport_->bytes_sent() - sent_before,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return result;
}

ncclResult_t Communicator::simulate(const CollectiveArgs& args,
                                    CompressionEngine::PendingSteps* pending, double* seconds) {
  *seconds = 0;
  const AlgorithmInfo* algorithm = selection_.choose(args, nranks_);
  if (algorithm == nullptr) {
    return fail(ncclInvalidUsage, "rank %d: no algorithm implements %s (known: %s)", rank_,
                collective_name(args.kind), algorithm_names().c_str());
  }
  return compression_->simulate(args, algorithm->name, pending, seconds);
}

ncclResult_t Communicator::run_batch(const std::vector<CollectiveArgs>& calls) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  set_log_rank(rank_);
  TERSE_CHECK(check_usable());
  std::vector<TransferRequest> transfers;
  transfers.reserve(calls.size());
  for (const CollectiveArgs& call : calls) {
    if (!is_point_to_point(call.kind) || call.count == 0) continue;
    const AlgorithmContext context = point_to_point_context(call);
    const uint32_t operation = make_operation(context.sequence, 0);
    const size_t bytes = call.count * nccl_type_size(call.type);
    transfers.emplace_back();
    const ncclResult_t result =
        call.kind == CollectiveKind::kSend
            ? transport_->send(call.peer, operation, call.send, bytes, &transfers.back())
            : transport_->recv(call.peer, operation, call.recv, bytes, &transfers.back());
    if (result != ncclSuccess) {
      cancel_unfinished(transport_.get(), &transfers, result);
      break_with(result);
      return result;
    }
  }
  for (const CollectiveArgs& call : calls) {
    if (is_point_to_point(call.kind)) continue;
    const ncclResult_t result = run_locked(call, nullptr);
    if (result != ncclSuccess) {
      cancel_unfinished(transport_.get(), &transfers, result);
      return result;
    }
  }
  ncclResult_t result =
      transport_->wait(transfers.data(), transfers.size(), transport_->default_deadline());
  for (size_t i = 0; result == ncclSuccess && i < transfers.size(); ++i) {
    const TransferRequest& request = transfers[i];
    if (request.direction() == TransferDirection::kReceive &&
        request.received_bytes() != request.bytes()) {
      result = fail(ncclInvalidUsage,
                    "rank %d: the message from rank %d held %zu bytes where the receive expected "
                    "%zu; do the send and receive counts and datatypes agree?",
                    rank_, request.peer(), request.received_bytes(), request.bytes());
    }
  }
  if (result != ncclSuccess) break_with(result);
  return result;
}

ncclResult_t Communicator::revoke() {
  // As abort's first half: a wait in progress (holding call_mutex_) fails at once...
  interrupt();
  std::lock_guard<std::mutex> lock(call_mutex_);
  // ...and once it has returned nothing is in flight, so waits may run again (split, shrink).
  if (!aborted_) {
    interrupted_.store(false);
    if (transport_ != nullptr) transport_->clear_interrupt();
  }
  revoked_.store(true);
  std::lock_guard<std::mutex> error_lock(error_mutex_);
  async_error_.store(ncclSuccess);
  async_error_message_.clear();
  return ncclSuccess;
}

ncclResult_t Communicator::finalize() {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (aborted_ || interrupted_.load())
    return fail(ncclInvalidUsage, "rank %d: the communicator was aborted", rank_);
  if (revoked_.load()) {
    return fail(ncclInvalidUsage,
                "rank %d: ncclCommFinalize after ncclCommRevoke is invalid; destroy or abort it",
                rank_);
  }
  if (finalized_) return ncclSuccess;
  finalized_ = true;
  if (async_error_.load() != ncclSuccess) {
    transport_->abort();
  } else {
    transport_->close();
  }
  return ncclSuccess;
}

void Communicator::interrupt() {
  interrupted_.store(true);
  if (transport_ != nullptr) transport_->interrupt();
}

void Communicator::abort() {
  // Thread-safe: makes a wait in progress (holding call_mutex_) fail at once.
  interrupt();
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (aborted_) return;
  aborted_ = true;
  if (transport_ != nullptr && !finalized_) transport_->abort();
}

}  // namespace terse
