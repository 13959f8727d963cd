#include "transport/root_registry.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
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
        // The latest root at an address speaks for it (the port may have served another before).
        const std::string where = roots_[i]->address().to_string();
        const std::string why = roots_[i]->gave_up();
        gave_up_.erase(std::remove_if(gave_up_.begin(), gave_up_.end(),
                                      [&](const auto& entry) { return entry.first == where; }),
                       gave_up_.end());
        if (!why.empty()) {
          if (gave_up_.size() == kGaveUpKept) gave_up_.erase(gave_up_.begin());
          gave_up_.emplace_back(where, why);
        }
        roots_.erase(roots_.begin() + i);
      } else {
        ++i;
      }
    }
    roots_.push_back(std::move(root));
  }

  // Why the root at `address` gave up, or "".
  std::string gave_up(const SocketAddress& address) {
    const std::string wanted = address.to_string();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& root : roots_) {
      if (root->address().to_string() == wanted) return root->gave_up();
    }
    for (const auto& [where, why] : gave_up_) {
      if (where == wanted) return why;
    }
    return "";
  }

 private:
  pid_t owner_ = getpid();
  std::mutex mutex_;
  std::vector<std::unique_ptr<BootstrapRoot>> roots_;
  // The addresses and reasons of the last roots that gave up, once they are gone from roots_.
  static constexpr size_t kGaveUpKept = 16;
  std::vector<std::pair<std::string, std::string>> gave_up_;
};

RootRegistry& registry() {
  static RootRegistry registry;
  return registry;
}

}  // namespace

void keep_root_until_finished(std::unique_ptr<BootstrapRoot> root) {
  registry().keep(std::move(root));
}

Result check_root_kept_here(const SocketAddress& address) {
  const std::string why = registry().gave_up(address);
  if (why.empty()) return Result::kSuccess;
  return fail(Result::kRemoteError,
              "the bootstrap root this process started at %s gave up the rendezvous: %s",
              address.to_string().c_str(), why.c_str());
}

}  // namespace terse
