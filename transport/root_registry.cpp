#include "transport/root_registry.h"

#include <unistd.h>

#include <mutex>
#include <vector>

namespace terse {
namespace {

class RootRegistry {
 public:
  ~RootRegistry() {
    // A forked child inherits the vector but not the threads: joining them would hang.
    if (getpid() != owner_) {
      for (auto& root : roots_) root.release();
    }
  }

  void keep(std::unique_ptr<BootstrapRoot> root) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < roots_.size();) {
      if (roots_[i]->finished()) {
        roots_.erase(roots_.begin() + i);
      } else {
        ++i;
      }
    }
    roots_.push_back(std::move(root));
  }

 private:
  pid_t owner_ = getpid();
  std::mutex mutex_;
  std::vector<std::unique_ptr<BootstrapRoot>> roots_;
};

}  // namespace

void keep_root_until_finished(std::unique_ptr<BootstrapRoot> root) {
  static RootRegistry registry;
  registry.keep(std::move(root));
}

}  // namespace terse
