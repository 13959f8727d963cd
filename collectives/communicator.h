// One rank's communicator: what an ncclComm_t is in terse's own engine. It owns the rank's
// transport, numbers the operations so their messages stay apart (operation_numbers.h), picks
// and runs an algorithm per call (algorithm_selection.h), and keeps the communicator's error
// state: once a call fails inside an algorithm (a dead peer, an interrupt, a size mismatch) the
// communicator is broken, as NCCL's is, and every later call fails at once with that error until
// the user aborts or destroys it.
//
// Threading: calls may come from any thread; run(), run_batch(), split() and finalize() are
// serialised (one call on a communicator at a time, as its transport requires). abort() and
// the accessors may be called from another thread at any time: abort() interrupts a blocked
// call, waits for it to return, then force-closes the transport.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/algorithm_selection.h"
#include "collectives/collective_args.h"
#include "collectives/compressed/compression_engine.h"
#include "transport/transport.h"
#include "transport/unique_id.h"

namespace terse {

class Communicator {
 public:
  // Creates rank `rank` of `nranks`: the transport (bootstrap rendezvous named by `id`, so all
  // ranks must call it) and the settings read from the environment at creation: TERSE_ALGO
  // (refused at once if it names an unknown algorithm) and TERSE_PIECE_BYTES (pipeline piece
  // size, K/M/G suffixes, default 1M). `cuda_device` is recorded for ncclCommCuDevice (-1:
  // none). Before it returns, the ranks compare the settings that decide which messages flow
  // (agreed_settings.h): when any differs, creation fails on every rank with ncclInvalidUsage
  // and a sentence naming the variable, its values and the ranks that hold them.
  static ncclResult_t create(const UniqueId& id, int rank, int nranks, int cuda_device,
                             std::unique_ptr<Communicator>* out);
  // The same over a transport whose peers' addresses `exchange` provides (Transport::create):
  // terse's side of a communicator that wraps a real NCCL one (plugin/comm_mode.h).
  static ncclResult_t create(const Transport::PeerExchange& exchange, uint16_t communicator,
                             int rank, int nranks, int cuda_device,
                             std::unique_ptr<Communicator>* out);

  // Closes the transport (flushing what was sent) unless finalized or aborted before; a broken
  // communicator is aborted instead, so destruction never waits for dead peers.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int cuda_device() const { return cuda_device_; }

  // What the communicator needs of a call before anything moves: a known data type, root or
  // peer in range, non-null buffers where this rank uses them (count > 0), and no byte count
  // that overflows size_t. ncclInvalidArgument with a message naming the argument otherwise.
  ncclResult_t check_arguments(const CollectiveArgs& args) const;

  // Runs one collective, send or receive to completion on this rank (host buffers): checks the
  // arguments, fails at once if the communicator is broken, finalized or aborted, chooses the
  // algorithm and runs it with the next operation number. A failure inside the algorithm
  // breaks the communicator (async_error()).
  ncclResult_t run(const CollectiveArgs& args);
  // The same with a given algorithm instead of the selection's (tests and perf tools compare
  // algorithms this way); it must implement args.kind. Every rank must pass the same one.
  ncclResult_t run(const CollectiveArgs& args, const AlgorithmInfo* algorithm);

  // Runs the calls a group queued for this communicator (group.h): every send and receive is
  // posted first, then the collectives run in issue order, then the sends and receives are
  // waited for, so sends and receives in one group never wait on each other's order. The
  // arguments must have been checked.
  ncclResult_t run_batch(const std::vector<CollectiveArgs>& calls);

  // ncclGroupSimulateEnd: the seconds the cost model predicts for `args` as run() would run it
  // (CompressionEngine::simulate, with the dense algorithm run() would choose), moving nothing:
  // no operation number, no message, no buffer, no tensor step. The call's step goes into
  // `pending`, the simulated group's own, which later calls of the group are planned after. The
  // arguments must have been checked.
  ncclResult_t simulate(const CollectiveArgs& args, CompressionEngine::PendingSteps* pending,
                        double* seconds);

  // The algorithm run() would use for `args`.
  const AlgorithmInfo* choose_algorithm(const CollectiveArgs& args) const {
    return selection_.choose(args, nranks_);
  }

  // ncclCommGetAsyncError: ncclSuccess while healthy, else the error that broke it (also
  // ncclInvalidUsage once aborted). The message says what happened ("" while healthy).
  ncclResult_t async_error() const { return async_error_.load(); }
  std::string async_error_message() const;
  // Records `result` (not success) as what broke the communicator, with the thread's last error
  // as the message; the first error stays. The algorithms' failures do this themselves; the API
  // layer calls it for failures it finds in work it queued on the communicator's behalf (a
  // device-buffer call that already returned success to its caller). Thread-safe.
  void break_with(ncclResult_t result);

  // ncclCommSplit. Collective over every rank of this communicator: each passes a color
  // (>= 0, or NCCL_SPLIT_NOCOLOR) and a key; the ranks of one color form a new communicator,
  // ranked by key (ties by rank here). `*out` is null for NCCL_SPLIT_NOCOLOR. The lowest rank
  // of each color starts the new communicator's bootstrap root; the ids travel over this
  // communicator's transport.
  ncclResult_t split(int color, int key, std::unique_ptr<Communicator>* out);

  // ncclCommShrink. Collective over this communicator's ranks less `excluded` (which take no
  // part and may be dead): they form a new communicator, keeping their order. Every remaining
  // rank must pass the same list. `abort_first` (NCCL_SHRINK_ABORT) revokes this communicator
  // first, so that a call stuck on a dead peer in another thread ends; without it a call in
  // flight is waited for. A communicator that failed earlier may be shrunk (that is what shrink
  // is for); an aborted or finalized one may not. The lowest remaining rank starts the new
  // bootstrap root and sends its id to the others over this communicator's transport.
  ncclResult_t shrink(const std::vector<int>& excluded, bool abort_first,
                      std::unique_ptr<Communicator>* out);

  // ncclCommRevoke: a call in flight on another thread fails at once; once it has returned
  // (waited for here), the communicator is quiescent and revoked: collectives, sends, receives
  // and finalize fail with ncclInvalidUsage, while split, shrink, abort and destruction work,
  // and async_error() is ncclSuccess again. Calling it again does nothing.
  ncclResult_t revoke();

  // ncclCommFinalize: closes the transport, flushing everything sent (bounded by
  // TERSE_TIMEOUT_S). Later calls fail with ncclInvalidUsage. Every call here completes before
  // it returns, so there is nothing else to finish.
  ncclResult_t finalize();

  // The first half of ncclCommAbort, from any thread and without waiting for anything: a call
  // blocked in another thread fails at once (a flush in finalize ends), and every later call
  // fails with ncclInvalidUsage.
  void interrupt();
  // ncclCommAbort: interrupt(), wait for the call in progress to return, and force-close the
  // transport. Returns within about three seconds after that call does.
  void abort();

  // The transport, for tests and for the layers above that exchange setup data.
  Transport* transport() { return transport_.get(); }
  // The call lock, for code that drives the transport itself instead of through run() (the
  // compressed algorithms' tests): held, it keeps the idle progress thread off the workers.
  std::unique_lock<std::mutex> hold_transport() {
    return std::unique_lock<std::mutex>(call_mutex_);
  }
  // The compression policy, statistics and residuals of this communicator's allreduces (the
  // C API of include/terse/terse.h reaches them here). Never null once created.
  CompressionEngine* compression() { return compression_.get(); }

 private:
  Communicator() = default;
  // What both create()s do once the transport is connected.
  static ncclResult_t create_on(std::unique_ptr<Transport> transport, int cuda_device,
                                std::unique_ptr<Communicator>* out);
  // The next collective's sequence, and the next per-peer send/receive sequence.
  AlgorithmContext collective_context();
  AlgorithmContext point_to_point_context(const CollectiveArgs& args);
  // Fails unless calls may run now (mutex held).
  ncclResult_t check_usable() const;
  // Fails unless split or shrink may run now (mutex held): not aborted nor finalized, and for
  // split (`broken_ok` false) not broken (a revoke clears that state).
  ncclResult_t check_manageable(const char* what, bool broken_ok) const;
  // `algorithm` null: the selection's choice.
  ncclResult_t run_locked(const CollectiveArgs& args, const AlgorithmInfo* algorithm);

  int rank_ = 0;
  int nranks_ = 0;
  int cuda_device_ = -1;
  size_t piece_bytes_ = kDefaultPieceBytes;
  AlgorithmSelection selection_;
  std::unique_ptr<Transport> transport_;
  // Declared after the transport: destroyed first, while the transport still exists.
  std::unique_ptr<CompressionEngine> compression_;

  // One call at a time; the transport's idle progress thread takes it between calls.
  std::mutex call_mutex_;
  uint64_t collectives_issued_ = 0;
  std::vector<uint64_t> sends_issued_;     // by peer
  std::vector<uint64_t> receives_issued_;  // by peer
  bool finalized_ = false;
  bool aborted_ = false;
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> revoked_{false};

  std::atomic<ncclResult_t> async_error_{ncclSuccess};
  mutable std::mutex error_mutex_;
  std::string async_error_message_;
};

}  // namespace terse
