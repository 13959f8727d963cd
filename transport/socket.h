// A TCP socket that owns its descriptor, with every blocking step bounded by a Deadline. The
// bootstrap is the only user: UCX opens its own connections for the data path.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>

#include "common/result.h"
#include "transport/deadline.h"
#include "transport/socket_address.h"

namespace terse {

class Socket {
 public:
  Socket() = default;
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()), peer_(other.peer_) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds to `address` (port 0 picks a free port) and listens. Non-blocking, close-on-exec.
  static Result listen(const SocketAddress& address, Socket* out);

  // Connects to `address`. Refused or unreachable attempts are retried with a growing pause
  // until `deadline`, because the peer (the bootstrap root) may not have started yet, unless
  // `worth_retrying` (asked after each failed attempt) answers an error, which is then returned.
  static Result connect(const SocketAddress& address, const Deadline& deadline, Socket* out,
                        const std::function<Result()>& worth_retrying = nullptr);

  // Starts connecting to `address` without waiting (one attempt, no retries: for a peer known to
  // listen already, such as an ncclNet listen comm); `*out` holds the socket meanwhile.
  // Result::kRemoteError when the attempt fails at once (refused).
  static Result start_connect(const SocketAddress& address, Socket* out);
  // Whether a start_connect() connection is up yet, without waiting; Result::kRemoteError when it
  // failed.
  Result connect_finished(bool* done) const;

  // Accepts one waiting connection; leaves `*out` closed when none is waiting. Returns 0, or the
  // errno of a failure that is the listener's (out of descriptors, say). Logs nothing: the
  // bootstrap root decides what a stranger's traffic is worth a line.
  int accept(Socket* out, SocketAddress* peer) const;

  // Sends or receives exactly `size` bytes or fails (peer gone, deadline passed). `what` names
  // the data in the error message ("the bootstrap reply").
  Result send_all(const void* data, size_t size, const Deadline& deadline, const char* what) const;
  // With `closed` given, a peer that closes (or resets) the connection first is not an error:
  // `*closed` is set and nothing is logged (the bootstrap client connects again when the root drops
  // it).
  Result recv_all(void* data, size_t size, const Deadline& deadline, const char* what,
                  bool* closed = nullptr) const;

  // Reads whatever is available without waiting: the byte count (0 when nothing is there yet),
  // or -1 when the peer closed the connection or it failed.
  ssize_t recv_available(void* data, size_t size) const;
  // Sends what fits without waiting: the byte count, or -1 when the connection failed. Logs
  // nothing (the root's best-effort answers to connections it is about to drop).
  ssize_t send_available(const void* data, size_t size) const;

  SocketAddress local_address() const;
  // The address connected to or accepted from (kept, so it can still be named after a reset).
  const SocketAddress& peer_address() const { return peer_; }

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();

 private:
  Socket(int fd, const SocketAddress& peer) : fd_(fd), peer_(peer) {}
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  int fd_ = -1;
  SocketAddress peer_;
};

}  // namespace terse
