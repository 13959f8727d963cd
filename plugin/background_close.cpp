#include "plugin/background_close.h"

#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace terse {
namespace {

// The closing threads, joined when the library is unloaded (at exit), before UCX goes away.
class BackgroundCloser {
 public:
  ~BackgroundCloser() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& thread : threads) thread.join();
  }

  void close(std::unique_ptr<DeviceStaging> staging, std::unique_ptr<Communicator> engine) {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.emplace_back([staging = std::move(staging), engine = std::move(engine)]() mutable {
      if (staging) {
        staging->finish();
        staging.reset();
      }
      engine.reset();
    });
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

BackgroundCloser& closer() {
  static BackgroundCloser instance;
  return instance;
}

}  // namespace

void close_in_background(std::unique_ptr<DeviceStaging> staging,
                         std::unique_ptr<Communicator> engine) {
  closer().close(std::move(staging), std::move(engine));
}

}  // namespace terse
