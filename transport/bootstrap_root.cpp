#include "transport/bootstrap_root.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "common/log.h"
#include "common/result.h"
#include "common/thread_name.h"
#include "transport/bootstrap_rendezvous.h"

namespace terse {

Result BootstrapRoot::start(const SocketAddress& bind_address, uint64_t secret,
                            double timeout_seconds, std::unique_ptr<BootstrapRoot>* out) {
  BootstrapKey key;
  TERSE_CHECK(derive_bootstrap_key(secret, &key));
  Socket listener;
  TERSE_CHECK(Socket::listen(bind_address, &listener));
  int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    return fail(Result::kSystemError, "cannot create the bootstrap root's stop event: %s",
                strerror(errno));
  }
  std::unique_ptr<BootstrapRoot> root(
      new BootstrapRoot(std::move(listener), stop_fd, key, timeout_seconds));
  try {
    root->thread_ = std::thread([raw = root.get()] { raw->run(); });
  } catch (const std::system_error& error) {
    return fail(Result::kSystemError, "cannot start the bootstrap root thread: %s", error.what());
  }
  TERSE_INFO("bootstrap root listening on %s", root->address_.to_string().c_str());
  *out = std::move(root);
  return Result::kSuccess;
}

BootstrapRoot::BootstrapRoot(Socket listener, int stop_fd, const BootstrapKey& key,
                             double timeout_seconds)
    : listener_(std::move(listener)),
      stop_fd_(stop_fd),
      address_(listener_.local_address()),
      key_(key),
      timeout_seconds_(timeout_seconds) {}

BootstrapRoot::~BootstrapRoot() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t written = write(stop_fd_, &one, sizeof(one));
    (void)written;  // the eventfd cannot be full; nothing useful to do if it were
    thread_.join();
  }
  close(stop_fd_);
}

void BootstrapRoot::run() {
  name_this_thread("terse-root");
  // Nothing may end this thread but the rendezvous itself: an allocation that fails (a flood of
  // strangers on a machine out of memory) gives up the rendezvous, and the ranks get their
  // deadline's error, instead of terminating the process.
  // Copied while the exception lives (its what() dies with it), into a buffer on the stack.
  char gave_up[sizeof(gave_up_)] = "";
  try {
    BootstrapRendezvous rendezvous(key_, timeout_seconds_);
    rendezvous.serve(listener_, stop_fd_);
  } catch (const std::exception& error) {
    TERSE_WARN("bootstrap root: giving up the rendezvous: %s", error.what());
    snprintf(gave_up, sizeof(gave_up), "%s", error.what()[0] != '\0' ? error.what() : "unknown");
  }
  // Late strangers now get "connection refused" instead of a silent wait.
  listener_.close();
  std::lock_guard<std::mutex> lock(mutex_);
  memcpy(gave_up_, gave_up, sizeof(gave_up_));
  finished_ = true;
  finished_changed_.notify_all();
}

bool BootstrapRoot::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

std::string BootstrapRoot::gave_up() {
  std::lock_guard<std::mutex> lock(mutex_);
  return gave_up_;
}

bool BootstrapRoot::wait_finished(const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_changed_.wait_until(lock, deadline.when(), [this] { return finished_; });
}

}  // namespace terse
