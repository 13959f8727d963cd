// Progress for a rank's workers while its owner is not using them.
//
// A UCX rendezvous transfer needs both sides to progress until both requests are done: the
// receiver can finish its receive while the sender still waits for the receiver's last protocol
// message (the ack of a get, or the reply to a put), which the receiver's worker sends only when
// something progresses it. A rank that returns from a collective and then stops calling terse
// (a long compute step, a barrier of another library, the test harness joining its threads)
// would leave its peer's send hanging until TERSE_TIMEOUT_S and failing it. NCCL keeps a proxy
// thread progressing for the same reason. Here a thread per transport sleeps on the workers'
// event descriptors and progresses them whenever they have events and the owner's lock is free;
// it costs nothing while idle, and nothing on the hot path (the owner's own waits progress as
// before, and the thread only try-locks).
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/ucx_worker.h"

namespace terse {

class IdleProgress {
 public:
  // Progresses `workers` whenever `owner_lock` is free. Every use of the workers by their owner
  // must hold that lock (the workers run in UCS_THREAD_MODE_SERIALIZED).
  IdleProgress(std::vector<UcxWorker*> workers, std::mutex* owner_lock);
  // Stops and joins the thread; may be called with `owner_lock` held (the thread only try-locks).
  ~IdleProgress();
  IdleProgress(const IdleProgress&) = delete;
  IdleProgress& operator=(const IdleProgress&) = delete;

  // Rounds of progress the thread made (for tests).
  unsigned long rounds() const { return rounds_.load(); }

 private:
  void run();

  std::vector<UcxWorker*> workers_;
  std::mutex* owner_lock_;
  std::atomic<bool> stop_{false};
  std::atomic<unsigned long> rounds_{0};
  std::thread thread_;
};

}  // namespace terse
