#include "transport/socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

// Small bootstrap messages must not wait for Nagle's algorithm.
void disable_nagle(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits until `fd` is ready for `events`; false when the deadline passed first.
bool wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    int ready = poll(&entry, 1, deadline.poll_timeout_ms(1000));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the caller's I/O call report it
    if (deadline.expired()) return false;
  }
}

// One non-blocking connect attempt, bounded by `deadline`; returns 0 or an errno value.
int try_connect(const SocketAddress& address, const Deadline& deadline, int* fd_out) {
  int fd = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int error = 0;
  if (::connect(fd, address.get(), address.length()) != 0) {
    error = errno;
    if (error == EINPROGRESS || error == EINTR) {
      if (!wait_ready(fd, POLLOUT, deadline)) {
        error = ETIMEDOUT;
      } else {
        socklen_t length = sizeof(error);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      }
    }
  }
  if (error != 0) {
    ::close(fd);
    return error;
  }
  disable_nagle(fd);
  *fd_out = fd;
  return 0;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
    peer_ = other.peer_;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result Socket::listen(const SocketAddress& address, Socket* out) {
  int fd = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(Result::kSystemError, "cannot create a socket to listen on %s: %s",
                address.to_string().c_str(), strerror(errno));
  }
  Socket socket(fd, SocketAddress());
  // A fixed port (NCCL_COMM_ID) must be reusable right after the previous job's root exited.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, address.get(), address.length()) != 0) {
    return fail(Result::kSystemError, "cannot bind the bootstrap root to %s: %s",
                address.to_string().c_str(), strerror(errno));
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    return fail(Result::kSystemError, "cannot listen on %s: %s", address.to_string().c_str(),
                strerror(errno));
  }
  *out = std::move(socket);
  return Result::kSuccess;
}

Result Socket::connect(const SocketAddress& address, const Deadline& deadline, Socket* out,
                       const std::function<Result()>& worth_retrying) {
  auto pause = std::chrono::milliseconds(10);
  for (int attempt = 1;; ++attempt) {
    int fd = -1;
    int error = try_connect(address, deadline, &fd);
    if (error == 0) {
      *out = Socket(fd, address);
      return Result::kSuccess;
    }
    if (deadline.expired() || deadline.seconds_left() * 1000 < pause.count()) {
      return fail(Result::kRemoteError,
                  "could not connect to %s within the deadline after %d attempts (last error: "
                  "%s); is the bootstrap root running there, and is TERSE_TIMEOUT_S long "
                  "enough for every rank to start?",
                  address.to_string().c_str(), attempt, strerror(error));
    }
    if (worth_retrying) TERSE_CHECK(worth_retrying());
    if (attempt == 1) {
      TERSE_INFO("connect to %s failed (%s); retrying until the deadline",
                 address.to_string().c_str(), strerror(error));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

Result Socket::start_connect(const SocketAddress& address, Socket* out) {
  int fd = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(Result::kSystemError, "cannot create a socket to connect to %s: %s",
                address.to_string().c_str(), strerror(errno));
  }
  if (::connect(fd, address.get(), address.length()) != 0 && errno != EINPROGRESS &&
      errno != EINTR) {
    int error = errno;
    ::close(fd);
    return fail(Result::kRemoteError, "cannot connect to %s: %s", address.to_string().c_str(),
                strerror(error));
  }
  *out = Socket(fd, address);
  return Result::kSuccess;
}

Result Socket::connect_finished(bool* done) const {
  *done = false;
  pollfd entry{fd_, POLLOUT, 0};
  if (poll(&entry, 1, 0) <= 0) return Result::kSuccess;
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  if (error != 0) {
    return fail(Result::kRemoteError, "cannot connect to %s: %s", peer_.to_string().c_str(),
                strerror(error));
  }
  disable_nagle(fd_);
  *done = true;
  return Result::kSuccess;
}

int Socket::accept(Socket* out, SocketAddress* peer) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  int fd =
      accept4(fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    out->close();
    // Nothing waiting, or a connection that died before we got to it: neither is our error.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
      return 0;
    }
    return errno;
  }
  disable_nagle(fd);
  *peer = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&address), length);
  *out = Socket(fd, *peer);
  return 0;
}

Result Socket::send_all(const void* data, size_t size, const Deadline& deadline,
                        const char* what) const {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t sent = send(fd_, bytes, size, MSG_NOSIGNAL);
    if (sent > 0) {
      bytes += sent;
      size -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd_, POLLOUT, deadline)) {
        return fail(Result::kRemoteError, "sending %s to %s did not finish before the deadline",
                    what, peer_address().to_string().c_str());
      }
      continue;
    }
    return fail(Result::kRemoteError, "sending %s to %s failed: %s", what,
                peer_address().to_string().c_str(), strerror(errno));
  }
  return Result::kSuccess;
}

Result Socket::recv_all(void* data, size_t size, const Deadline& deadline, const char* what,
                        bool* closed) const {
  if (closed != nullptr) *closed = false;
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t received = recv(fd_, bytes, size, 0);
    if (received > 0) {
      bytes += received;
      size -= static_cast<size_t>(received);
      continue;
    }
    if (received == 0 && closed != nullptr) {
      *closed = true;
      return Result::kSuccess;
    }
    if (received == 0) {
      return fail(Result::kRemoteError, "%s closed the connection while %s was expected",
                  peer_address().to_string().c_str(), what);
    }
    if (errno == EINTR) continue;
    // A peer that closes with our data unread resets the connection instead of ending it.
    if (closed != nullptr && (errno == ECONNRESET || errno == EPIPE)) {
      *closed = true;
      return Result::kSuccess;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd_, POLLIN, deadline)) {
        return fail(Result::kRemoteError, "%s did not arrive from %s before the deadline", what,
                    peer_address().to_string().c_str());
      }
      continue;
    }
    return fail(Result::kRemoteError, "receiving %s from %s failed: %s", what,
                peer_address().to_string().c_str(), strerror(errno));
  }
  return Result::kSuccess;
}

ssize_t Socket::recv_available(void* data, size_t size) const {
  for (;;) {
    ssize_t received = recv(fd_, data, size, 0);
    if (received > 0) return received;
    if (received == 0) return -1;
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  }
}

ssize_t Socket::send_available(const void* data, size_t size) const {
  for (;;) {
    ssize_t sent = send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) return sent;
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  }
}

SocketAddress Socket::local_address() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&address), length);
}

}  // namespace terse
