// Encoding and decoding off NCCL's proxy thread. The proxy thread is also the one that progresses
// UCX: a message encoded inside isend would leave the link idle for the encoder's time, so that
// wire and coder run one after the other (on a 1 Gbit/s link that made lossless mode slower than
// off). Jobs go to a few threads shared by every comm of the process
// (TERSE_NET_CODER_THREADS, default 2), and the comm posts or completes the message when its job
// is done, so the link carries message k while message k + 1 is encoded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/net/lossless_codec.h"

namespace terse::net {

struct CoderJob {
  // Runs on a pool thread with that thread's own codec.
  std::function<void(LosslessCodec&)> work;
  int level = 1;
  std::atomic<bool> done{true};
};

class CoderPool {
 public:
  // The process's pool, its threads started on first use.
  static CoderPool& instance();
  ~CoderPool();

  // Queues `job` (done becomes false now, true once its work returned).
  void submit(CoderJob* job);
  // Waits until `job` is done (a close that must not free what a job still uses).
  static void wait(const CoderJob& job);

 private:
  explicit CoderPool(int threads);
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<CoderJob*> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace terse::net
