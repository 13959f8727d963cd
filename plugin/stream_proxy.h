// A communicator's stream proxy: one thread that runs, in the order the calls were made, every
// engine call of a communicator that has seen device buffers. A call on device buffers returns
// to its caller once its copies are enqueued on the stream; the proxy runs the host collective
// when the stream has staged the inputs (a CUDA host function calls mark_ready) and then
// publishes the unit's sequence number to a 32-bit flag the stream waits on before copying the
// outputs back (device_staging.h). Host-buffer calls and communicator-wide calls (split,
// finalize) on such a communicator go through the same queue (run_in_order), so the engine
// numbers every operation in issue order on every rank, whatever the streams' timing.
//
// Why a thread per communicator: ranks in one process (threads as ranks) each need their own to
// progress together, and the CUDA host-function thread, shared by the whole process, must never
// block (host functions here only mark a unit ready).
//
// Nothing here calls CUDA: the flag is any 32-bit word (pinned host memory in use, plain memory
// in tests), so the ordering, error and shutdown rules are tested without a GPU.
#pragma once

#include <nccl.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "transport/deadline.h"

namespace terse {

class StreamProxy {
 public:
  // What the proxy runs for a unit (the engine call). Its failure is reported to whoever waits
  // for the unit; breaking the communicator is the work's own business.
  using Work = std::function<ncclResult_t()>;

  // One queued unit. Shared with the CUDA host function that marks it ready, which may run
  // after the proxy is gone (a stream still held back by the user): the unit keeps what that
  // touches alive.
  class Unit;

  // How stop() ends the queue.
  enum class StopMode {
    // Every queued unit still runs once ready; units not ready by the deadline are abandoned
    // (ncclCommDestroy: the calls already made complete, as NCCL's destroy flushes them).
    kFinish,
    // Nothing more runs; the running unit finishes (interrupt the engine to hurry it). For
    // ncclCommAbort.
    kAbandon,
  };

  // Starts the thread. `flag` receives each finished unit's sequence number (release ordering,
  // so a stream that sees it also sees the outputs); it must outlive the proxy. `wait_seconds`
  // bounds wait() (TERSE_TIMEOUT_S in use).
  explicit StreamProxy(uint32_t* flag, double wait_seconds = 600);
  // stop(kAbandon) unless stopped, then join().
  ~StreamProxy();
  StreamProxy(const StreamProxy&) = delete;
  StreamProxy& operator=(const StreamProxy&) = delete;

  // Queues `work` behind every unit queued before it; it runs once mark_ready(*unit) has been
  // called (at once if `ready`). `*sequence` is the value published when it has run or been
  // abandoned (the flag then holds it or later: compare cyclically, as CU_STREAM_WAIT_VALUE_GEQ
  // does). Fails with ncclInvalidUsage once stopping.
  ncclResult_t enqueue(Work work, bool ready, std::shared_ptr<Unit>* unit, uint32_t* sequence);

  // Lets `unit` run. Never blocks beyond a short lock and never calls CUDA, so a CUDA host
  // function may call it; harmless after the proxy stopped.
  static void mark_ready(const std::shared_ptr<Unit>& unit);

  // Waits until `unit` has run or been abandoned and returns its result; on failure the
  // message is this thread's last error too. A unit that has not started within the proxy's
  // wait_seconds (a call queued before it waits for a stream that does not move) is cancelled:
  // it will never run, its sequence is published in its turn, and wait returns ncclSystemError
  // saying so. The communicator's calls are then out of step with its peers': the caller must
  // break it. A unit already running is waited for to the end (the engine bounds it).
  static ncclResult_t wait(const std::shared_ptr<Unit>& unit);

  // Whether wait() gave up on `unit` before it started (it never runs).
  static bool cancelled(const std::shared_ptr<Unit>& unit);

  // Runs `work` on the proxy after everything queued before, and waits for it. `*cancelled`
  // (optional) tells whether wait() gave up on it before it ran.
  ncclResult_t run_in_order(Work work, bool* cancelled = nullptr);

  // Ends the queue as `mode` says (kFinish waits for readiness until `deadline`); returns at
  // once: join() waits for the thread. Later enqueues fail. The first stop decides, except
  // that kAbandon overrides an earlier kFinish.
  void stop(StopMode mode, Deadline deadline = Deadline::after_seconds(0));
  // Waits for the thread after stop(). Every unit still queued then is abandoned: it fails
  // with ncclInvalidUsage and its sequence is published, so no stream waits for it.
  void join();

  // The last sequence handed out (0 before the first unit).
  uint32_t last_sequence() const;

  struct State;

 private:
  void run();

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace terse
