#include "transport/bootstrap_rendezvous.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/result.h"
#include "transport/bootstrap_messages.h"

namespace terse {
namespace {

// A genuine rank sends its whole hello right after connecting; anything slower is a stranger.
constexpr double kHelloSeconds = 10.0;

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  char text[512];
  va_list args;
  va_start(args, pattern);
  vsnprintf(text, sizeof(text), pattern, args);
  va_end(args);
  return text;
}

}  // namespace

BootstrapRendezvous::BootstrapRendezvous(uint64_t secret, double timeout_seconds)
    : secret_(secret),
      timeout_seconds_(timeout_seconds),
      give_up_at_(Deadline::after_seconds(timeout_seconds)) {}

void BootstrapRendezvous::serve(const Socket& listener, int stop_fd) {
  while (!done_) {
    std::vector<pollfd> entries;
    entries.push_back({stop_fd, POLLIN, 0});
    entries.push_back({listener.fd(), POLLIN, 0});
    for (const Arrival& arrival : arrivals_) entries.push_back({arrival.socket.fd(), POLLIN, 0});
    int ready = poll(entries.data(), entries.size(), next_wakeup().poll_timeout_ms(1000));
    if (ready < 0 && errno != EINTR) {
      TERSE_WARN("bootstrap root: poll failed (%s); giving up", strerror(errno));
      give_up();
      return;
    }
    if (entries[0].revents != 0) return;  // asked to stop
    if (entries[1].revents != 0) accept_waiting(listener);

    // Advance every arrival; admitting one may finish the rendezvous, so check done_ each time.
    for (size_t i = 0; i < arrivals_.size() && !done_;) {
      HelloState state = read_hello(&arrivals_[i]);
      if (state == HelloState::kIncomplete) {
        ++i;
        continue;
      }
      Arrival arrival = std::move(arrivals_[i]);
      arrivals_.erase(arrivals_.begin() + i);
      if (state == HelloState::kComplete) admit(&arrival);
    }
    if (!done_ && give_up_at_.expired()) give_up();
  }
}

Deadline BootstrapRendezvous::next_wakeup() const {
  Deadline wakeup = give_up_at_;
  for (const Arrival& arrival : arrivals_) wakeup = wakeup.min(arrival.deadline);
  return wakeup;
}

void BootstrapRendezvous::accept_waiting(const Socket& listener) {
  for (;;) {
    Socket socket;
    SocketAddress peer;
    if (listener.accept(&socket, &peer) != ncclSuccess) {
      // Out of descriptors or similar: pause rather than spin on a listener that stays readable.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    if (!socket.is_open()) return;
    TERSE_TRACE("bootstrap root: connection from %s", peer.to_string().c_str());
    arrivals_.push_back({std::move(socket), {}, Deadline::after_seconds(kHelloSeconds)});
  }
}

BootstrapRendezvous::HelloState BootstrapRendezvous::read_hello(Arrival* arrival) {
  const std::string from = arrival->socket.peer_address().to_string();
  size_t needed = kBootstrapHelloBytes;
  if (arrival->bytes.size() >= kBootstrapHelloBytes) {
    needed += decode_hello(arrival->bytes.data()).payload_bytes;
  }
  while (arrival->bytes.size() < needed) {
    size_t have = arrival->bytes.size();
    arrival->bytes.resize(needed);
    ssize_t got = arrival->socket.recv_available(arrival->bytes.data() + have, needed - have);
    arrival->bytes.resize(have + std::max<ssize_t>(got, 0));
    if (got < 0) {
      TERSE_WARN(
          "bootstrap root: dropped a connection from %s that closed after %zu of the %zu "
          "bytes of a hello",
          from.c_str(), have, needed);
      return HelloState::kDropped;
    }
    if (got == 0) break;
    if (have < kBootstrapHelloBytes && arrival->bytes.size() >= kBootstrapHelloBytes) {
      // The header is in: check who this is before reading (or allocating for) a payload.
      BootstrapHello hello = decode_hello(arrival->bytes.data());
      if (hello.magic != kBootstrapHelloMagic || hello.version != kBootstrapVersion) {
        TERSE_WARN(
            "bootstrap root: dropped a connection from %s that is not a terse rank of "
            "this version (magic 0x%08x, version %u)",
            from.c_str(), hello.magic, hello.version);
        return HelloState::kDropped;
      }
      if (hello.secret != secret_) {
        TERSE_WARN(
            "bootstrap root: dropped a connection from %s that presented a wrong secret "
            "(a rank of another job, or a stale unique id)",
            from.c_str());
        return HelloState::kDropped;
      }
      if (hello.payload_bytes > kMaxBootstrapPayloadBytes) {
        reply_error(arrival->socket, -1, ncclInvalidArgument,
                    format("rank %u announced a %u-byte payload; the limit is %u bytes", hello.rank,
                           hello.payload_bytes, kMaxBootstrapPayloadBytes));
        return HelloState::kDropped;
      }
      needed += hello.payload_bytes;
    }
  }
  if (arrival->bytes.size() >= needed) return HelloState::kComplete;
  if (arrival->deadline.expired()) {
    TERSE_WARN(
        "bootstrap root: dropped a connection from %s that sent %zu bytes and then "
        "nothing for %.0f s",
        from.c_str(), arrival->bytes.size(), kHelloSeconds);
    return HelloState::kDropped;
  }
  return HelloState::kIncomplete;
}

void BootstrapRendezvous::admit(Arrival* arrival) {
  BootstrapHello hello = decode_hello(arrival->bytes.data());
  const std::string from = arrival->socket.peer_address().to_string();
  if (hello.nranks < 1 || hello.nranks > static_cast<uint32_t>(kMaxBootstrapRanks) ||
      hello.rank >= hello.nranks) {
    reply_error(arrival->socket, -1, ncclInvalidArgument,
                format("rank %u with nranks %u (from %s) is out of range (need 0 <= rank < "
                       "nranks <= %d)",
                       hello.rank, hello.nranks, from.c_str(), kMaxBootstrapRanks));
    return;
  }
  const int rank = static_cast<int>(hello.rank);
  if (!anyone_arrived_) {
    // Every rank gives the rendezvous the same time from its own start.
    anyone_arrived_ = true;
    give_up_at_ = Deadline::after_seconds(timeout_seconds_);
  }
  if (failed_) {
    reply_error(arrival->socket, rank, failure_code_, failure_message_);
    return;
  }
  if (nranks_ == 0) {
    nranks_ = static_cast<int>(hello.nranks);
    rank_sockets_.resize(nranks_);
    rank_payloads_.resize(nranks_);
    answered_.assign(nranks_, false);
  }
  if (static_cast<int>(hello.nranks) != nranks_) {
    int other = 0;
    while (other < nranks_ && !rank_sockets_[other].is_open()) ++other;
    fail_everyone(ncclInvalidUsage,
                  format("ranks disagree on the communicator size: rank %d (from %s) passed "
                         "nranks=%u, but rank %d passed nranks=%d",
                         rank, from.c_str(), hello.nranks, other, nranks_));
    reply_error(arrival->socket, rank, failure_code_, failure_message_);
    return;
  }
  if (rank_sockets_[rank].is_open()) {
    fail_everyone(
        ncclInvalidUsage,
        format("two processes passed rank %d (from %s and from %s); every rank of a "
               "communicator must be distinct",
               rank, rank_sockets_[rank].peer_address().to_string().c_str(), from.c_str()));
    reply_error(arrival->socket, rank, failure_code_, failure_message_);
    return;
  }
  TERSE_TRACE("bootstrap root: rank %d of %d arrived from %s", rank, nranks_, from.c_str());
  rank_sockets_[rank] = std::move(arrival->socket);
  rank_payloads_[rank].assign(arrival->bytes.begin() + kBootstrapHelloBytes, arrival->bytes.end());
  if (++joined_ == nranks_) send_tables();
}

void BootstrapRendezvous::reply_error(const Socket& socket, int rank, ncclResult_t code,
                                      const std::string& message) {
  BootstrapReplyHeader header;
  header.status = code;
  header.body_bytes = message.size();
  std::vector<uint8_t> bytes = encode_reply_header(header);
  bytes.insert(bytes.end(), message.begin(), message.end());
  // Best effort: a rank that cannot be told will reach its own deadline.
  Deadline deadline = Deadline::after_seconds(std::min(timeout_seconds_, 5.0));
  (void)socket.send_all(bytes.data(), bytes.size(), deadline, "a bootstrap error reply");
  if (failed_ && rank >= 0 && rank < nranks_ && !answered_[rank]) {
    answered_[rank] = true;
    // Once every rank number has been told, nobody else can be waiting: stop serving.
    if (++answered_count_ == nranks_) done_ = true;
  }
}

void BootstrapRendezvous::fail_everyone(ncclResult_t code, const std::string& message) {
  TERSE_WARN("bootstrap root: the rendezvous failed: %s", message.c_str());
  failed_ = true;
  failure_code_ = code;
  failure_message_ = message;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (!rank_sockets_[rank].is_open()) continue;
    reply_error(rank_sockets_[rank], rank, code, message);
    rank_sockets_[rank].close();
  }
}

void BootstrapRendezvous::send_tables() {
  std::vector<uint8_t> body = encode_payload_table(rank_payloads_);
  BootstrapReplyHeader header;
  header.body_bytes = body.size();
  std::vector<uint8_t> head = encode_reply_header(header);
  Deadline deadline = Deadline::after_seconds(timeout_seconds_);
  for (int rank = 0; rank < nranks_; ++rank) {
    // A rank that died after its hello cannot be helped; the others still get their table.
    if (rank_sockets_[rank].send_all(head.data(), head.size(), deadline, "the rank table") ==
        ncclSuccess) {
      (void)rank_sockets_[rank].send_all(body.data(), body.size(), deadline, "the rank table");
    }
    rank_sockets_[rank].close();
  }
  TERSE_INFO("bootstrap root: all %d ranks arrived; sent each the %zu-byte rank table", nranks_,
             body.size());
  done_ = true;
}

void BootstrapRendezvous::give_up() {
  if (!failed_ && joined_ > 0) {
    fail_everyone(ncclRemoteError,
                  format("only %d of %d ranks reached the bootstrap root within %.0f s "
                         "(TERSE_TIMEOUT_S); missing ranks: %s",
                         joined_, nranks_, timeout_seconds_, missing_ranks().c_str()));
  } else if (!anyone_arrived_) {
    TERSE_INFO("bootstrap root: no rank arrived within %.0f s (TERSE_TIMEOUT_S); exiting",
               timeout_seconds_);
  }
  done_ = true;
}

std::string BootstrapRendezvous::missing_ranks() const {
  std::string list;
  int listed = 0, missing = 0;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (rank_sockets_[rank].is_open()) continue;
    ++missing;
    if (listed < 16) {
      list += (listed++ == 0 ? "" : ", ") + std::to_string(rank);
    }
  }
  if (missing > listed) list += format(" and %d more", missing - listed);
  return list;
}

}  // namespace terse
