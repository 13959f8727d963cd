#include "plugin/background_close.h"

#include <atomic>
#include <iterator>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "common/exception_guard.h"
#include "common/log.h"
#include "common/result.h"
#include "common/thread_name.h"

namespace terse {
namespace {

class BackgroundCloser {
 public:
  ~BackgroundCloser() {
    std::list<Closing> closings;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closings.swap(closings_);
    }
    for (Closing& closing : closings) closing.thread.join();
  }

  void close(std::unique_ptr<DeviceStaging> staging, std::unique_ptr<Communicator> engine,
             CloseMode mode) noexcept {
    // Held by the thread, and still ours if the thread cannot start.
    std::shared_ptr<Job> job;
    try {
      job = std::make_shared<Job>();
    } catch (...) {
      (void)result_of_current_exception("closing a communicator");
      Job here{std::move(staging), std::move(engine), mode};
      (void)call_guarded("closing a communicator", [&] {
        here.run();
        return ncclSuccess;
      });
      return;
    }
    job->staging = std::move(staging);
    job->engine = std::move(engine);
    job->mode = mode;
    std::list<Closing> finished;
    bool started = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = closings_.begin(); it != closings_.end();) {
        auto next = std::next(it);
        if (it->done->load()) finished.splice(finished.end(), closings_, it);
        it = next;
      }
      // Everything that can fail to allocate comes before the thread starts: a started thread
      // must land in the list (a std::thread destroyed unjoined ends the process).
      bool listed = false;
      try {
        closings_.emplace_back();
        listed = true;
        Closing& closing = closings_.back();
        closing.done = std::make_shared<std::atomic<bool>>(false);
        closing.thread = std::thread([job, done = closing.done] {
          name_this_thread("terse-close");
          (void)call_guarded("closing a communicator", [&] {
            job->run();
            return ncclSuccess;
          });
          done->store(true);
        });
        started = true;
      } catch (...) {
        if (listed) closings_.pop_back();
        (void)result_of_current_exception("starting a thread to close a communicator");
      }
    }
    for (Closing& closing : finished) closing.thread.join();
    // No thread to spare: close here instead (a flush may then wait for peers this thread
    // drives, until the deadline; an abort does not wait).
    if (!started)
      (void)call_guarded("closing a communicator", [&] {
        job->run();
        return ncclSuccess;
      });
  }

 private:
  struct Closing {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  struct Job {
    std::unique_ptr<DeviceStaging> staging;
    std::unique_ptr<Communicator> engine;
    CloseMode mode = CloseMode::kFlush;

    void run() {
      if (staging) {
        if (mode == CloseMode::kAbort) {
          staging->proxy().stop(StreamProxy::StopMode::kAbandon);
        } else {
          staging->finish();
        }
        staging.reset();
      }
      if (engine && mode == CloseMode::kAbort) engine->abort();
      engine.reset();
    }
  };

  std::mutex mutex_;
  std::list<Closing> closings_;
};

BackgroundCloser& closer() {
  static BackgroundCloser instance;
  return instance;
}

}  // namespace

void close_in_background(std::unique_ptr<DeviceStaging> staging,
                         std::unique_ptr<Communicator> engine, CloseMode mode) noexcept {
  closer().close(std::move(staging), std::move(engine), mode);
}

}  // namespace terse
