// Transport::wait and its failure path: how requests finish, time out, and are cancelled.
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "common/log.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

// An idle wait first polls, yielding the core between polls: when ranks outnumber cores (several
// ranks per host, or the host busy with other work) the peer this rank waits for may need this
// very core, and handing it over at once is what keeps small-message latency in microseconds.
// sched_yield costs a fraction of a microsecond when nothing else is runnable. A wait idle for
// longer than that (a straggling peer) sleeps on the worker's event descriptor instead, so it
// stops taking CPU time; the sleep is capped because not every UCX transport signals every event.
constexpr auto kYieldBeforeSleep = std::chrono::milliseconds(5);
// A message that is about to arrive lands within a few polls: those spin without yielding. The
// clock is read only every few polls too, since on virtual machines without a fast clock source a
// clock read costs as much as a poll.
constexpr unsigned kSpinPolls = 16;
constexpr unsigned kPollsPerClockRead = 16;
constexpr int kMaxSleepMs = 1;
// How long cancelled requests get to finish before their endpoints are force-closed, and how long
// after that before they are abandoned to UCX.
constexpr double kCancelSeconds = 0.2;
constexpr double kForceCloseSeconds = 1.0;
// How long a receive from a peer whose endpoint failed keeps progressing before it is declared
// failed: a peer that sent and then closed left its message queued here, and that message
// matches within microseconds of progress; a dead peer's never comes.
constexpr auto kPeerFailureGrace = std::chrono::milliseconds(100);

std::vector<TransferRequest*> unfinished(TransferRequest* requests, size_t count) {
  std::vector<TransferRequest*> list;
  for (size_t i = 0; i < count; ++i) {
    if (requests[i].posted() && requests[i].status() == UCS_INPROGRESS)
      list.push_back(&requests[i]);
  }
  return list;
}

}  // namespace

bool Transport::peer_process_gone(int peer) const {
  return watched_[peer] && is_gone(processes_[peer]);
}

Result Transport::wait(TransferRequest* requests, size_t count, const Deadline& deadline) {
  // The clock starts only after the spinning polls: most waits on a small message end within
  // them, and then read no clock at all.
  Deadline::Clock::time_point started, now, idle_since, next_liveness_check;
  unsigned idle_polls = 0;
  bool sleeping = false;
  for (unsigned poll = 0;; ++poll) {
    if (poll == kSpinPolls) {
      started = now = idle_since = Deadline::Clock::now();
      next_liveness_check = started + kPeerFailureGrace;
    } else if (poll > kSpinPolls && (sleeping || poll % kPollsPerClockRead == 0)) {
      now = Deadline::Clock::now();
    }
    const bool timing = poll >= kSpinPolls;
    const bool grace_over = timing && now - started >= kPeerFailureGrace;
    const bool check_liveness = timing && now >= next_liveness_check;
    if (check_liveness) next_liveness_check = now + kLivenessCheckInterval;
    bool culprit_process_gone = false;
    TransferRequest* culprit = nullptr;
    ucs_status_t culprit_status = UCS_OK;
    bool culprit_peer_failed = false;
    TransferRequest* first_unfinished = nullptr;
    for (size_t i = 0; i < count; ++i) {
      TransferRequest& request = requests[i];
      if (!request.posted()) continue;
      ucs_status_t status = request.status();
      if (status == UCS_INPROGRESS) {
        if (first_unfinished == nullptr) first_unfinished = &request;
        // UCX fails sends to a dead peer, but a receive is posted on the worker, not on an
        // endpoint: it would wait for the deadline unless we look at the peer's health.
        ucs_status_t peer_error = links_[request.peer()].peer_error();
        if (culprit == nullptr && request.direction() == TransferDirection::kReceive &&
            peer_error != UCS_OK && grace_over) {
          culprit = &request;
          culprit_status = peer_error;
          culprit_peer_failed = true;
        }
        if (culprit == nullptr && check_liveness && peer_process_gone(request.peer())) {
          culprit = &request;
          culprit_status = UCS_ERR_ENDPOINT_TIMEOUT;
          culprit_process_gone = true;
        }
      } else if (status != UCS_OK && culprit == nullptr) {
        culprit = &request;
        culprit_status = status;
      }
    }
    if (culprit == nullptr && first_unfinished == nullptr) return Result::kSuccess;

    char reason[256] = "";
    Result code = Result::kRemoteError;
    if (culprit != nullptr && culprit_status == UCS_ERR_MESSAGE_TRUNCATED) {
      code = Result::kInvalidUsage;
      snprintf(reason, sizeof(reason),
               "failed: the message was longer than the receive buffer (do the ranks agree on "
               "the sizes?)");
    } else if (culprit_process_gone) {
      snprintf(reason, sizeof(reason), "failed: rank %d's process (pid %d) has exited",
               culprit->peer(), static_cast<int>(processes_[culprit->peer()].pid));
    } else if (culprit != nullptr) {
      snprintf(reason, sizeof(reason), "failed: %s%s", ucs_status_string(culprit_status),
               culprit_peer_failed ? " (UCX reported the peer failed)" : "");
    } else if (interrupted_.load()) {
      culprit = first_unfinished;
      snprintf(reason, sizeof(reason), "was interrupted: the communicator is being aborted");
    } else if (timing && now >= deadline.when()) {
      culprit = first_unfinished;
      snprintf(reason, sizeof(reason),
               "did not finish before its deadline (TERSE_TIMEOUT_S=%.0f); the peer may have "
               "died, hung, or not posted the matching call",
               timeout_seconds_);
    }
    if (culprit != nullptr) {
      std::string subject = describe(*culprit);
      cancel_unfinished(requests, count);
      return fail(code, "rank %d: %s %s", rank_, subject.c_str(), reason);
    }

    sleeping = false;
    if (progress_workers() != 0) {
      idle_since = now;
      idle_polls = 0;
    } else if (++idle_polls <= kSpinPolls) {
      // spin: the message may be a poll away
    } else if (now - idle_since >= kYieldBeforeSleep) {
      sleep_until_event(deadline.poll_timeout_ms(kMaxSleepMs));
      sleeping = true;
    } else {
      sched_yield();
    }
  }
}

void Transport::cancel_unfinished(TransferRequest* requests, size_t count) {
  std::vector<TransferRequest*> pending = unfinished(requests, count);
  if (pending.empty()) return;
  for (TransferRequest* request : pending) request->cancel();
  Deadline settle = Deadline::after_seconds(kCancelSeconds);
  while (!pending.empty() && !settle.expired()) {
    if (progress_workers() == 0) sleep_until_event(settle.poll_timeout_ms(1));
    pending = unfinished(requests, count);
  }
  if (pending.empty()) return;

  // Sends, and receives UCX already matched, cannot be cancelled; force-closing the peer's
  // endpoint completes them (UCS_ERR_CANCELED), so none keeps using the caller's buffer.
  std::vector<Link*> closing;
  for (TransferRequest* request : pending) {
    Link& link = links_[request->peer()];
    if (!link.is_open()) continue;
    TERSE_INFO("rank %d: force-closing the endpoint to rank %d to end a %s", rank_, request->peer(),
               describe(*request).c_str());
    link.start_close(/*force=*/true);
    closing.push_back(&link);
  }
  Deadline give_up = Deadline::after_seconds(kForceCloseSeconds);
  while (!pending.empty() && !give_up.expired()) {
    if (progress_workers() == 0) sleep_until_event(give_up.poll_timeout_ms(1));
    pending = unfinished(requests, count);
  }
  // The closes are UCX's from here, finished or not.
  for (Link* link : closing) link->abandon_close();
  for (TransferRequest* request : pending) {
    TERSE_WARN(
        "rank %d: a %s did not end after cancellation and a forced close; abandoning it "
        "to UCX",
        rank_, describe(*request).c_str());
    request->abandon();
  }
}

}  // namespace terse
