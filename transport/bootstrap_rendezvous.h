// The bootstrap root's state machine (see bootstrap_root.h for the rules it enforces): one poll
// loop over the listening socket and every connection whose hello is still arriving, so a
// stranger that connects and stalls delays nobody.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/deadline.h"
#include "transport/socket.h"

namespace terse {

class BootstrapRendezvous {
 public:
  BootstrapRendezvous(uint64_t secret, double timeout_seconds);

  // Returns once every rank has its reply, the rendezvous has given up, or `stop_fd` is readable.
  void serve(const Socket& listener, int stop_fd);

 private:
  // A connection whose hello is still coming in.
  struct Arrival {
    Socket socket;
    std::vector<uint8_t> bytes;
    Deadline deadline;
  };
  enum class HelloState { kIncomplete, kComplete, kDropped };

  void accept_waiting(const Socket& listener);
  HelloState read_hello(Arrival* arrival);
  void admit(Arrival* arrival);
  void fail_everyone(ncclResult_t code, const std::string& message);
  void reply_error(const Socket& socket, int rank, ncclResult_t code, const std::string& message);
  void send_tables();
  void give_up();
  std::string missing_ranks() const;
  Deadline next_wakeup() const;

  uint64_t secret_;
  double timeout_seconds_;
  Deadline give_up_at_;
  bool anyone_arrived_ = false;
  std::vector<Arrival> arrivals_;

  int nranks_ = 0;  // 0 until the first valid hello says
  std::vector<Socket> rank_sockets_;
  std::vector<std::vector<uint8_t>> rank_payloads_;
  int joined_ = 0;

  bool failed_ = false;
  ncclResult_t failure_code_ = ncclSuccess;
  std::string failure_message_;
  std::vector<bool> answered_;  // after a failure: which ranks have been told
  int answered_count_ = 0;

  bool done_ = false;
};

}  // namespace terse
