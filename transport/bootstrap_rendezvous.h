// The bootstrap root's state machine (see bootstrap_root.h for the rules it enforces): one poll
// loop over the listening socket and every connection whose hello is still arriving, so a
// stranger that connects and stalls delays nobody.
//
// Strangers cannot crowd the ranks out: at most kMaxPendingConnections connections wait for
// their hello at once (when another arrives, or descriptors run out, the longest-waiting one is
// dropped), each has kHelloSeconds to present an authenticated hello, and each accept burst is
// bounded so that hellos already in are read between bursts. A genuine rank answers the
// challenge within a round trip, so it is read long before it is the oldest; a rank dropped
// anyway sees its connection close without a reply and connects again (bootstrap_client.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/bootstrap_drop_log.h"
#include "transport/bootstrap_key.h"
#include "transport/deadline.h"
#include "transport/socket.h"

namespace terse {

constexpr size_t kMaxPendingConnections = 256;
constexpr double kHelloSeconds = 2.0;

class BootstrapRendezvous {
 public:
  BootstrapRendezvous(const BootstrapKey& key, double timeout_seconds);

  // Returns once every rank has its reply, the rendezvous has given up, or `stop_fd` is readable.
  void serve(const Socket& listener, int stop_fd);

 private:
  // A connection whose hello is still coming in.
  struct Arrival {
    Socket socket;
    std::vector<uint8_t> bytes;
    Deadline deadline;
    uint8_t nonce[kBootstrapNonceBytes];
  };
  enum class HelloState { kIncomplete, kComplete, kDropped };

  void accept_waiting(const Socket& listener);
  void drop_oldest(const char* reason);
  HelloState read_hello(Arrival* arrival);
  void admit(Arrival* arrival);
  void fail_everyone(Result code, const std::string& message);
  // An authenticated error reply; `rank` < 0 for a connection that is not a rank's.
  void reply_error(const Socket& socket, const uint8_t* nonce, int rank, Result code,
                   const std::string& message);
  void send_tables();
  void give_up();
  std::string missing_ranks() const;
  Deadline next_wakeup() const;

  BootstrapKey key_;
  double timeout_seconds_;
  Deadline give_up_at_;
  bool anyone_arrived_ = false;
  std::vector<Arrival> arrivals_;  // oldest first
  BootstrapDropLog drops_;

  int nranks_ = 0;  // 0 until the first valid hello says
  std::vector<Socket> rank_sockets_;
  std::vector<std::vector<uint8_t>> rank_nonces_;
  std::vector<std::vector<uint8_t>> rank_payloads_;
  int joined_ = 0;

  bool failed_ = false;
  Result failure_code_ = Result::kSuccess;
  std::string failure_message_;
  std::vector<bool> answered_;  // after a failure: which ranks have been told
  int answered_count_ = 0;

  bool done_ = false;
};

}  // namespace terse
