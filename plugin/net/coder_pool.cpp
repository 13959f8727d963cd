#include "plugin/net/coder_pool.h"

#include <sched.h>

#include <cstdint>
#include <map>
#include <memory>

#include "common/env.h"
#include "plugin/net/net_log.h"

namespace terse::net {
namespace {

constexpr int kDefaultThreads = 2;
constexpr int kMaxThreads = 64;

}  // namespace

CoderPool& CoderPool::instance() {
  static CoderPool pool([] {
    int64_t threads = kDefaultThreads;
    if (env_int("TERSE_NET_CODER_THREADS", kDefaultThreads, &threads) != ncclSuccess ||
        threads < 1 || threads > kMaxThreads) {
      NET_WARN("TERSE_NET_CODER_THREADS=%s is not 1 to %d; using %d",
               env_string("TERSE_NET_CODER_THREADS", "").c_str(), kMaxThreads, kDefaultThreads);
      threads = kDefaultThreads;
    }
    return static_cast<int>(threads);
  }());
  return pool;
}

CoderPool::CoderPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

CoderPool::~CoderPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void CoderPool::submit(CoderJob* job) {
  job->done.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
  }
  ready_.notify_one();
}

void CoderPool::wait(const CoderJob& job) {
  while (!job.done.load(std::memory_order_acquire)) sched_yield();
}

void CoderPool::run() {
  // zstd contexts are reused across jobs: one codec per level on each thread.
  std::map<int, std::unique_ptr<LosslessCodec>> codecs;
  for (;;) {
    CoderJob* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = jobs_.front();
      jobs_.pop_front();
    }
    std::unique_ptr<LosslessCodec>& codec = codecs[job->level];
    if (!codec) codec = std::make_unique<LosslessCodec>(job->level);
    job->work(*codec);
    job->done.store(true, std::memory_order_release);
  }
}

}  // namespace terse::net
