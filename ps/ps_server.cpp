// The parameter server's thread and its lifetime: creating the server (its transport and thread),
// the loop that takes each duty in turn and sleeps when idle, and the teardown that fails what is
// in flight and lets UCX finish with every buffer before the transport goes.
#include "ps/ps_server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/byte_allgather.h"
#include "common/exception_guard.h"
#include "common/log.h"
#include "common/result.h"
#include "common/thread_name.h"
#include "ps/ps_server_internal.h"

namespace terse {
namespace {

constexpr int kSleepMs = 1;
// How often in-flight messages are checked against their deadlines and their owners' health
// (a /proc read per owner), and so how often the thread wakes while any are in flight.
constexpr auto kFailureCheckInterval = std::chrono::milliseconds(10);
constexpr int kFailureCheckMs = 10;
// After the transport closed, how long the last cancelled transfers get to end before their
// buffers are deliberately leaked rather than freed under UCX.
constexpr double kFinalSettleSeconds = 1.0;
// The tag layout's communicator field of the server's transport: apart from the communicator's
// own (a second guard, since the workers are apart already).
constexpr uint16_t kServerTagSalt = 0x5053;  // "PS"
// The longest worker address a rank may send (UCX's are a few hundred bytes).
constexpr uint64_t kMaxWorkerAddressBytes = uint64_t{1} << 20;

// A message may be freed only once none of its transfers can touch its buffers.
bool transfers_done(PsClientMessage& message) {
  return !in_progress(message.header_send) && !in_progress(message.payload_send) &&
         !in_progress(message.reply_receive);
}

}  // namespace

ncclResult_t PsServer::create(Transport* control, std::unique_ptr<PsServer>* out) {
  std::unique_ptr<PsServer> server(new PsServer());
  server->rank_ = control->rank();
  server->nranks_ = control->nranks();
  server->load_.assign(size_t(server->nranks_), 0);
  // The new workers' addresses differ in length: a byte allgather over the communicator's
  // transport.
  const Transport::PeerExchange exchange =
      [control](const std::vector<uint8_t>& mine,
                std::vector<std::vector<uint8_t>>* table) -> ncclResult_t {
    return allgather_bytes([control](const void* bytes, size_t size,
                                     void* all) { return control->allgather(bytes, size, all); },
                           control->nranks(), mine, kMaxWorkerAddressBytes,
                           "its server's worker address", table);
  };
  TERSE_CHECK(Transport::create(exchange, control->communicator() ^ kServerTagSalt, server->rank_,
                                server->nranks_, &server->transport_));
  server->timeout_seconds_ = server->transport_->timeout_seconds();
  server->clients_.resize(size_t(server->nranks_));
  server->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (server->wake_fd_ < 0) {
    return fail(ncclSystemError, "tersePsInit: eventfd failed: %s", std::strerror(errno));
  }
  PsServer* raw = server.get();
  server->thread_ = std::thread([raw] {
    name_this_thread("terse-ps");
    call_guarded("the parameter server's thread", [raw] {
      raw->run();
      return ncclSuccess;
    });
  });
  *out = std::move(server);
  return ncclSuccess;
}

PsServer::~PsServer() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  if (transport_ != nullptr) {
    // Every message has been finished or cancelled by now; a peer that failed, or a
    // communicator that was aborted or destroyed, gets no flush.
    if (peer_failed_ || force_close_.load()) {
      transport_->abort();
    } else {
      transport_->close();
    }
    // Closed endpoints end their transfers as they are progressed: wait for that, and leak what
    // still does not end rather than free a buffer UCX may write into.
    const Deadline settle = Deadline::after_seconds(kFinalSettleSeconds);
    while (!settled() && !settle.expired()) {
      if (transport_->progress() == 0) transport_->wait_for_event(kSleepMs);
      reap();
    }
    if (!settled()) {
      TERSE_WARN(
          "rank %d: parameter server: transfers still unfinished at close; leaking their "
          "buffers",
          rank_);
      for (auto& message : abandoned_) (void)message.release();
      for (auto& incoming : abandoned_incoming_) (void)incoming.release();
      new std::list<Reply>(std::move(replies_));     // leaked on purpose, as above
      new std::vector<Client>(std::move(clients_));  // their header buffers, likewise
    }
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void PsServer::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  // A full counter already wakes the thread; nothing to do on failure.
  (void)!write(wake_fd_, &one, sizeof(one));
}

bool PsServer::settled() {
  for (Client& client : clients_) {
    if (in_progress(client.header_receive)) return false;
  }
  return abandoned_.empty() && abandoned_incoming_.empty() && replies_.empty();
}

bool PsServer::needs_timed_wake() const {
  if (!in_flight_.empty() || !clock_waiters_.empty() || !abandoned_incoming_.empty()) return true;
  for (const Client& client : clients_) {
    if (!client.queue.empty()) return true;
  }
  return false;
}

void PsServer::run() {
  for (int client = 0; client < nranks_; ++client) post_header_receive(client);
  auto next_check = Deadline::Clock::now();
  while (!stop_.load()) {
    // Cleared before looking at the submissions: one made after this wakes the sleep below.
    uint64_t wakes = 0;
    (void)!read(wake_fd_, &wakes, sizeof(wakes));
    bool busy = take_submissions();
    busy = transport_->progress() != 0 || busy;
    busy = serve_clients() || busy;
    const auto now = Deadline::Clock::now();
    const bool check = now >= next_check;
    if (check) next_check = now + kFailureCheckInterval;
    busy = finish_client_messages(check) || busy;
    if (check && !clock_waiters_.empty()) fail_clocks_held_by_failed_ranks();
    busy = reap() || busy;
    if (busy) continue;
    // Idle: UCX events and submissions wake the thread; only deadlines and failure checks need
    // a timer, and only while something waits for them.
    transport_->wait_for_event(needs_timed_wake() ? kFailureCheckMs : -1, wake_fd_);
  }
  shut_down();
}

bool PsServer::reap() {
  bool busy = false;
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    if (!transfers_done(**it)) {
      ++it;
    } else {
      it = abandoned_.erase(it);
      busy = true;
    }
  }
  for (auto it = abandoned_incoming_.begin(); it != abandoned_incoming_.end();) {
    if (in_progress((*it)->payload_receive)) {
      ++it;
    } else {
      it = abandoned_incoming_.erase(it);
      busy = true;
    }
  }
  for (auto it = replies_.begin(); it != replies_.end();) {
    if (in_progress(it->send)) {
      ++it;
    } else {
      it = replies_.erase(it);
    }
  }
  return busy;
}

void PsServer::shut_down() {
  take_submissions();
  for (auto& message : in_flight_) {
    message->request->finish_part(ncclInvalidUsage,
                                  describe(*message) +
                                      ": the parameter server closed before the answer came "
                                      "(tersePsFree with the request in flight)");
    if (in_progress(message->reply_receive)) transport_->cancel(&message->reply_receive);
    abandoned_.push_back(std::move(message));
  }
  in_flight_.clear();
  for (Client& client : clients_) {
    // Header receives are eager-sized: unmatched they cancel at once, matched they end at once.
    if (in_progress(client.header_receive)) transport_->cancel(&client.header_receive);
    for (auto& incoming : client.queue) {
      if (in_progress(incoming->payload_receive)) {
        transport_->cancel(&incoming->payload_receive);
        abandoned_incoming_.push_back(std::move(incoming));
      }
    }
    client.queue.clear();
  }
  clock_waiters_.clear();
  // Answers and requests already sent get a moment to leave, and cancelled receives to end,
  // before the transport closes (the destructor waits for the rest after closing).
  const Deadline settle = Deadline::after_seconds(peer_failed_ ? 0.2 : 2.0);
  while (!settle.expired() && !settled()) {
    if (transport_->progress() == 0) transport_->wait_for_event(kSleepMs);
    reap();
  }
}

}  // namespace terse
