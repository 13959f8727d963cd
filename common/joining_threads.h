// Threads that are always joined. A std::thread still joinable when destroyed ends the process;
// when starting the n-th of several threads fails (std::system_error: the process is out of
// threads or memory), the ones already started must be joined before the error goes on to the
// caller (exception_guard.h turns it into Result::kSystemError). Those threads finish on their own:
// every wait in them has a deadline.
#pragma once

#include <thread>
#include <utility>
#include <vector>

namespace terse {

class JoiningThreads {
 public:
  explicit JoiningThreads(size_t expected = 0) { threads_.reserve(expected); }
  ~JoiningThreads() { join(); }
  JoiningThreads(const JoiningThreads&) = delete;
  JoiningThreads& operator=(const JoiningThreads&) = delete;

  template <class Body>
  void start(Body&& body) {
    threads_.emplace_back(std::forward<Body>(body));
  }

  void join() {
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace terse
