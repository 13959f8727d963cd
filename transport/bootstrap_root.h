// The bootstrap root: a thread that listens on one TCP address, collects every rank's hello
// (bootstrap_messages.h), and when all `nranks` have arrived answers each with the table of all
// payloads. It serves one rendezvous and exits.
//
// Connections that do not authenticate (wrong magic or version, a field out of bounds, a hello
// whose code the job's key does not reproduce, or no complete hello within kHelloSeconds) are
// dropped and change nothing, so a port scanner or a rank of another job cannot disturb the
// rendezvous; drops are logged at most once a second (bootstrap_drop_log.h). Inconsistent ranks
// (two processes with the same rank, different nranks) fail the whole rendezvous: every rank that
// arrived, or arrives later, gets the reason with Result::kInvalidUsage instead of waiting for its
// deadline. If not every rank arrived within the timeout (counted from the first arrival, or from
// the start when none came) the waiting ranks get Result::kRemoteError naming the missing ranks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "transport/bootstrap_key.h"
#include "transport/deadline.h"
#include "transport/socket.h"
#include "transport/socket_address.h"

namespace terse {

class BootstrapRoot {
 public:
  // Listens on `bind_address` (port 0 picks a free one) and starts the serving thread. The
  // handshake key comes from `secret` (the unique id's) and TERSE_COMM_SECRET (bootstrap_key.h).
  static Result start(const SocketAddress& bind_address, uint64_t secret, double timeout_seconds,
                      std::unique_ptr<BootstrapRoot>* out);

  // Stops the thread if it is still serving (waiting ranks then see the connection close) and
  // joins it.
  ~BootstrapRoot();
  BootstrapRoot(const BootstrapRoot&) = delete;
  BootstrapRoot& operator=(const BootstrapRoot&) = delete;

  // The address ranks connect to, with the port actually bound.
  const SocketAddress& address() const { return address_; }

  bool finished();
  // Why the thread gave up the rendezvous before it was done (an allocation failed), or "" when it
  // has not.
  std::string gave_up();
  // Waits until the thread has answered every rank or given up; false if `deadline` came first.
  bool wait_finished(const Deadline& deadline);

 private:
  BootstrapRoot(Socket listener, int stop_fd, const BootstrapKey& key, double timeout_seconds);
  void run();

  Socket listener_;
  int stop_fd_;  // an eventfd; written once to ask the thread to stop
  SocketAddress address_;
  BootstrapKey key_;
  double timeout_seconds_;
  std::mutex mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;
  // A fixed buffer: recording why must not allocate, since an allocation failing may be why.
  char gave_up_[256] = "";
  std::thread thread_;
};

}  // namespace terse
