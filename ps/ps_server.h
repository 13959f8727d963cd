// The parameter server of one communicator in one process: a UCX transport of its own (its own
// worker and endpoints, created over the communicator's control channel) and one thread that
// alone drives it. That thread serves the shards this rank owns (applies sends, answers
// receives and clocks, in each client's order) and carries this rank's own requests to the
// owners and their answers back, so no caller ever has to make progress.
//
// Why a transport of its own: a UCX worker runs in UCS_THREAD_MODE_SERIALIZED, and the
// communicator's worker is progressed by the caller inside collectives and by the idle progress
// thread between them (transport/idle_progress.h, under the call lock). A server that took the
// call lock to progress that worker would stall behind every collective and stall them in turn;
// one that did not would progress it beside them, which crashed CI before. With its own worker
// the server thread is that worker's only user, by construction.
//
// Atomicity: every shard is read and written by the server thread alone, one request at a time,
// so a receive never sees half of a send.
//
// Failures: each message of a request ends by the request's deadline (TERSE_TIMEOUT_S after it
// was made), and sooner when the transport reports its owner failed (Transport::peer_failed).
// A message or incoming request that ends while UCX may still write into its buffers (a reply
// or payload receive already matched, a send) is cancelled and kept until UCX let go of it.
//
// Sleeping: the thread blocks on its worker's events and on an eventfd that submit() and the
// destructor write, without a timeout while nothing waits for a deadline or a failure check.
//
// Its sources, by role: ps_server.cpp (creation, the thread's loop, teardown), ps_owner.cpp
// (serving this rank's shards and replying), ps_clock_waiters.cpp (clock requests waiting on the
// slowest rank), ps_client_outbox.cpp (this rank's requests to the owners and their answers).
// The update a send makes to a shard is a pure function of its own (shard_update.h).
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps_request.h"
#include "ps/ps_tensor.h"
#include "ps/ps_wire.h"
#include "transport/transfer_request.h"
#include "transport/transport.h"

namespace terse {

// One message of a request to one owner (a shard), until its answer arrives or it fails.
struct PsClientMessage {
  int owner = 0;
  PsRequestHeader header;
  // The payload message: a PsPayloadPrefix, then the values or the codec's message.
  std::vector<uint8_t> payload;
  // The answer: a PsReplyHeader then, for a receive, the shard's values.
  std::vector<uint8_t> reply;
  // A receive's destination: `header.shard`'s slice of the caller's tensor.
  void* destination = nullptr;
  std::shared_ptr<PsTensor> tensor;
  std::shared_ptr<PsRequest> request;
  Deadline deadline = Deadline::at({});
  TransferRequest header_send, payload_send, reply_receive;
};

class PsServer {
 public:
  // Collective over the communicator whose transport is `control` (its caller holds the
  // communicator's call lock): creates this rank's parameter-server transport, exchanging the
  // new workers' addresses over `control`, and starts the server thread.
  static ncclResult_t create(Transport* control, std::unique_ptr<PsServer>* out);
  // Makes the destructor force-close its endpoints instead of flushing them (the communicator
  // was aborted or destroyed: its peers may be gone, and nobody waits for them).
  void close_by_force() { force_close_.store(true); }
  // Stops the thread (requests still in flight fail) and closes the transport.
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  double timeout_seconds() const { return timeout_seconds_; }

  // Placement state, touched only by inits and frees (collective, under the communicator's
  // call lock): the next tensor id and the bytes each rank owns.
  uint32_t take_tensor_id() { return next_tensor_id_++; }
  std::vector<uint64_t>* load() { return &load_; }

  // Makes a tensor (its shards initialised) servable, or no longer servable.
  void add_tensor(std::shared_ptr<PsTensor> tensor);
  void remove_tensor(uint32_t id);

  // A request's messages, carried by the server thread from now on. Each sequence is taken
  // from next_sequence().
  void submit(std::vector<std::unique_ptr<PsClientMessage>> messages);
  uint32_t next_sequence() { return next_sequence_.fetch_add(1); }

 private:
  // A request to a shard this rank owns, until it is applied in its client's order.
  // A refused one is kept too, until its payload (if any) is drained into `payload`.
  struct Incoming {
    PsRequestHeader header;
    std::vector<uint8_t> payload;
    TransferRequest payload_receive;
    Deadline deadline = Deadline::at({});
    bool refused = false;
    ncclResult_t refusal = ncclSuccess;
    std::string why;
  };
  struct Client {
    PsRequestHeader header_buffer;
    TransferRequest header_receive;
    std::deque<std::unique_ptr<Incoming>> queue;
    bool failed = false;  // its header receive failed: it is not listened to any more
  };
  struct Reply {
    std::vector<uint8_t> bytes;
    TransferRequest send;
  };
  // A clock request answered once the slowest clock allows.
  struct ClockWaiter {
    int client;
    PsRequestHeader header;
    Deadline deadline;  // its client has given up by then: dropped
  };

  PsServer() = default;
  void run();
  // One pass over each duty; true when something happened.
  bool take_submissions();
  bool serve_clients();
  bool finish_client_messages(bool check_failures);
  // The head of a client's queue: applied, refused or failed once its payload is in.
  void finish_incoming(int client, std::unique_ptr<Incoming> head);
  bool reap();
  // Whether nothing left waits on UCX (abandoned messages, incoming, replies).
  bool settled();
  // Whether something waits for a deadline or a failure check (the thread must wake on time).
  bool needs_timed_wake() const;
  void post_header_receive(int client);
  // Serving.
  std::shared_ptr<PsTensor> find_tensor(uint32_t id);
  void apply(int client, Incoming* request);
  void answer_clocks(PsTensor* tensor);
  // Fails the clock waits that a failed rank holds back: its clock will never move.
  void fail_clocks_held_by_failed_ranks();
  void reply(int client, const PsRequestHeader& header, ncclResult_t result,
             const std::string& message, std::vector<uint8_t> payload = {},
             PsEncoding encoding = PsEncoding::kRaw);
  // Client side: an answer arrived for `message`; what the request gets.
  ncclResult_t take_answer(PsClientMessage* message, std::string* why);
  // take_answer's writes into the caller's tensor.
  ncclResult_t write_answer(PsClientMessage* message, const PsReplyHeader& answer,
                            const uint8_t* values, size_t count, std::string* why);
  std::string describe(const PsClientMessage& message) const;
  void shut_down();

  int rank_ = 0;
  int nranks_ = 0;
  double timeout_seconds_ = 0;
  std::unique_ptr<Transport> transport_;
  uint32_t next_tensor_id_ = 0;
  std::vector<uint64_t> load_;
  std::atomic<uint32_t> next_sequence_{1};

  std::mutex tensors_mutex_;
  std::map<uint32_t, std::shared_ptr<PsTensor>> tensors_;

  std::mutex submissions_mutex_;
  std::vector<std::unique_ptr<PsClientMessage>> submissions_;

  // The server thread's own state.
  std::vector<Client> clients_;
  std::list<std::unique_ptr<PsClientMessage>> in_flight_;
  // Messages that failed while UCX may still use their buffers: kept until it does not.
  std::list<std::unique_ptr<PsClientMessage>> abandoned_;
  // Incoming requests whose payload receive was cancelled unfinished: kept until it ends.
  std::list<std::unique_ptr<Incoming>> abandoned_incoming_;
  std::list<Reply> replies_;
  std::list<ClockWaiter> clock_waiters_;
  bool peer_failed_ = false;

  std::atomic<bool> stop_{false};
  std::atomic<bool> force_close_{false};
  int wake_fd_ = -1;  // eventfd: submit() and the destructor wake the thread through it
  void wake();
  std::thread thread_;
};

}  // namespace terse
