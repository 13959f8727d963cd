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

// Accepts per pass of the poll loop: between bursts the hellos already in are read, so a rank
// accepted in the middle of a flood is not pushed out by the rest of that flood.
constexpr size_t kAcceptBurst = 128;

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

BootstrapRendezvous::BootstrapRendezvous(const BootstrapKey& key, double timeout_seconds)
    : key_(key),
      timeout_seconds_(timeout_seconds),
      give_up_at_(Deadline::after_seconds(timeout_seconds)) {}

void BootstrapRendezvous::serve(const Socket& listener, int stop_fd) {
  std::vector<pollfd> entries;
  while (!done_) {
    entries.clear();
    entries.push_back({stop_fd, POLLIN, 0});
    entries.push_back({listener.fd(), POLLIN, 0});
    for (const Arrival& arrival : arrivals_) entries.push_back({arrival.socket.fd(), POLLIN, 0});
    int ready = poll(entries.data(), entries.size(), next_wakeup().poll_timeout_ms(1000));
    if (ready < 0 && errno != EINTR) {
      TERSE_WARN("bootstrap root: poll failed (%s); giving up", strerror(errno));
      give_up();
      break;
    }
    if (entries[0].revents != 0) break;  // asked to stop

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
    if (!done_ && entries[1].revents != 0) accept_waiting(listener);
    drops_.flush_if_due();
    if (!done_ && give_up_at_.expired()) give_up();
  }
  drops_.flush();
  if (drops_.total() > 0) {
    TERSE_INFO("bootstrap root: dropped %zu connections that were not ranks of this job",
               drops_.total());
  }
}

Deadline BootstrapRendezvous::next_wakeup() const {
  Deadline wakeup = give_up_at_.min(drops_.next_flush());
  for (const Arrival& arrival : arrivals_) wakeup = wakeup.min(arrival.deadline);
  return wakeup;
}

void BootstrapRendezvous::drop_oldest(const char* reason) {
  drops_.dropped(reason, arrivals_.front().socket.peer_address().to_string());
  arrivals_.erase(arrivals_.begin());
}

void BootstrapRendezvous::accept_waiting(const Socket& listener) {
  for (size_t accepted = 0; accepted < kAcceptBurst; ++accepted) {
    Socket socket;
    SocketAddress peer;
    int error = listener.accept(&socket, &peer);
    if (error != 0) {
      // Out of descriptors (or similar): make room by dropping the longest-waiting stranger.
      // With none to drop, pause rather than spin on a listener that stays readable.
      if (!arrivals_.empty() && (error == EMFILE || error == ENFILE)) {
        drop_oldest("pushed out when descriptors ran out");
        continue;
      }
      if (arrivals_.empty()) {
        drops_.dropped(format("accept failed (%s)", strerror(error)), "the listener");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    if (!socket.is_open()) return;
    if (arrivals_.size() >= kMaxPendingConnections) {
      drop_oldest("pushed out by newer connections while saying nothing useful");
    }
    Arrival arrival{std::move(socket), {}, Deadline::after_seconds(kHelloSeconds), {}};
    BootstrapChallenge challenge;
    if (random_bytes(challenge.nonce, sizeof(challenge.nonce)) != Result::kSuccess) {
      drops_.dropped("no random bytes for its challenge", peer.to_string());
      continue;
    }
    memcpy(arrival.nonce, challenge.nonce, sizeof(arrival.nonce));
    // A fresh connection's send buffer is empty: the challenge goes out whole or not at all.
    std::vector<uint8_t> bytes = encode_challenge(challenge);
    if (arrival.socket.send_available(bytes.data(), bytes.size()) !=
        static_cast<ssize_t>(bytes.size())) {
      drops_.dropped("closed before its challenge", peer.to_string());
      continue;
    }
    arrivals_.push_back(std::move(arrival));
  }
}

BootstrapRendezvous::HelloState BootstrapRendezvous::read_hello(Arrival* arrival) {
  const SocketAddress& from = arrival->socket.peer_address();
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
      drops_.dropped("closed before its hello was complete", from.to_string());
      return HelloState::kDropped;
    }
    if (got == 0) break;
    if (have < kBootstrapHelloBytes && arrival->bytes.size() >= kBootstrapHelloBytes) {
      // The header is in: check what it claims before reading (or allocating for) a payload.
      BootstrapHello hello = decode_hello(arrival->bytes.data());
      std::string wrong = check_hello_header(hello);
      if (!wrong.empty()) {
        drops_.dropped(wrong, from.to_string());
        return HelloState::kDropped;
      }
      needed += hello.payload_bytes;
    }
  }
  if (arrival->bytes.size() >= needed) {
    BootstrapHello hello = decode_hello(arrival->bytes.data());
    uint8_t expected[kBootstrapMacBytes];
    hello_mac(key_, arrival->nonce, hello, arrival->bytes.data() + kBootstrapHelloBytes, expected);
    if (!bootstrap_mac_equal(expected, hello.mac)) {
      // Told why (a misconfigured rank learns at once), yet changes nothing: anyone can be told
      // that they do not hold the key.
      reply_error(arrival->socket, arrival->nonce, -1, Result::kInvalidUsage,
                  "the hello's authentication code is wrong: this process does not hold the "
                  "job's bootstrap key (TERSE_COMM_SECRET differs between ranks, or the unique "
                  "id is stale or another job's)");
      drops_.dropped("a hello that does not authenticate", from.to_string());
      return HelloState::kDropped;
    }
    return HelloState::kComplete;
  }
  if (arrival->deadline.expired()) {
    drops_.dropped(format("no complete hello within %.0f s", kHelloSeconds), from.to_string());
    return HelloState::kDropped;
  }
  return HelloState::kIncomplete;
}

void BootstrapRendezvous::admit(Arrival* arrival) {
  BootstrapHello hello = decode_hello(arrival->bytes.data());
  const std::string from = arrival->socket.peer_address().to_string();
  const int rank = static_cast<int>(hello.rank);  // bounded by check_hello_header
  if (!anyone_arrived_) {
    // Every rank gives the rendezvous the same time from its own start.
    anyone_arrived_ = true;
    give_up_at_ = Deadline::after_seconds(timeout_seconds_);
  }
  if (failed_) {
    reply_error(arrival->socket, arrival->nonce, rank, failure_code_, failure_message_);
    return;
  }
  if (nranks_ == 0) {
    nranks_ = static_cast<int>(hello.nranks);
    rank_sockets_.resize(nranks_);
    rank_nonces_.resize(nranks_);
    rank_payloads_.resize(nranks_);
    answered_.assign(nranks_, false);
  }
  if (static_cast<int>(hello.nranks) != nranks_) {
    int other = 0;
    while (other < nranks_ && !rank_sockets_[other].is_open()) ++other;
    fail_everyone(Result::kInvalidUsage,
                  format("ranks disagree on the communicator size: rank %d (from %s) passed "
                         "nranks=%u, but rank %d passed nranks=%d",
                         rank, from.c_str(), hello.nranks, other, nranks_));
    reply_error(arrival->socket, arrival->nonce, rank, failure_code_, failure_message_);
    return;
  }
  if (rank_sockets_[rank].is_open()) {
    fail_everyone(
        Result::kInvalidUsage,
        format("two processes passed rank %d (from %s and from %s); every rank of a "
               "communicator must be distinct",
               rank, rank_sockets_[rank].peer_address().to_string().c_str(), from.c_str()));
    reply_error(arrival->socket, arrival->nonce, rank, failure_code_, failure_message_);
    return;
  }
  TERSE_TRACE("bootstrap root: rank %d of %d arrived from %s", rank, nranks_, from.c_str());
  rank_sockets_[rank] = std::move(arrival->socket);
  rank_nonces_[rank].assign(arrival->nonce, arrival->nonce + kBootstrapNonceBytes);
  rank_payloads_[rank].assign(arrival->bytes.begin() + kBootstrapHelloBytes, arrival->bytes.end());
  if (++joined_ == nranks_) send_tables();
}

void BootstrapRendezvous::reply_error(const Socket& socket, const uint8_t* nonce, int rank,
                                      Result code, const std::string& message) {
  BootstrapReplyHeader header;
  header.status = static_cast<uint32_t>(code.code());
  const std::string body = message.substr(0, kMaxBootstrapErrorBytes);
  header.body_bytes = body.size();
  uint8_t digest[kBootstrapDigestBytes];
  bootstrap_digest(body.data(), body.size(), digest);
  reply_mac(key_, nonce, header, digest, header.mac);
  std::vector<uint8_t> bytes = encode_reply_header(header);
  bytes.insert(bytes.end(), body.begin(), body.end());
  if (rank < 0) {
    // Not a rank: whatever fits now, and never a wait on a peer that may not read.
    (void)socket.send_available(bytes.data(), bytes.size());
    return;
  }
  // Best effort: a rank that cannot be told will reach its own deadline.
  Deadline deadline = Deadline::after_seconds(std::min(timeout_seconds_, 5.0));
  (void)socket.send_all(bytes.data(), bytes.size(), deadline, "a bootstrap error reply");
  if (failed_ && rank < nranks_ && !answered_[rank]) {
    answered_[rank] = true;
    // Once every rank number has been told, nobody else can be waiting: stop serving.
    if (++answered_count_ == nranks_) done_ = true;
  }
}

void BootstrapRendezvous::fail_everyone(Result code, const std::string& message) {
  TERSE_WARN("bootstrap root: the rendezvous failed: %s", message.c_str());
  failed_ = true;
  failure_code_ = code;
  failure_message_ = message;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (!rank_sockets_[rank].is_open()) continue;
    reply_error(rank_sockets_[rank], rank_nonces_[rank].data(), rank, code, message);
    rank_sockets_[rank].close();
  }
}

void BootstrapRendezvous::send_tables() {
  std::vector<uint8_t> body = encode_payload_table(rank_payloads_);
  uint8_t digest[kBootstrapDigestBytes];
  bootstrap_digest(body.data(), body.size(), digest);
  Deadline deadline = Deadline::after_seconds(timeout_seconds_);
  for (int rank = 0; rank < nranks_; ++rank) {
    BootstrapReplyHeader header;
    header.body_bytes = body.size();
    reply_mac(key_, rank_nonces_[rank].data(), header, digest, header.mac);
    std::vector<uint8_t> head = encode_reply_header(header);
    // A rank that died after its hello cannot be helped; the others still get their table.
    if (rank_sockets_[rank].send_all(head.data(), head.size(), deadline, "the rank table") ==
        Result::kSuccess) {
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
    fail_everyone(Result::kRemoteError,
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
