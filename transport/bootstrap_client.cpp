#include "transport/bootstrap_client.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/result.h"
#include "transport/bootstrap_messages.h"
#include "transport/bootstrap_root.h"
#include "transport/deadline.h"
#include "transport/root_registry.h"
#include "transport/socket.h"

namespace terse {
namespace {

constexpr double kReplyGraceSeconds = 5.0;

Result check_arguments(int rank, int nranks, const std::vector<uint8_t>& payload) {
  if (nranks < 1 || nranks > kMaxBootstrapRanks) {
    return fail(Result::kInvalidArgument, "nranks %d is out of range (1 to %d)", nranks,
                kMaxBootstrapRanks);
  }
  if (rank < 0 || rank >= nranks) {
    return fail(Result::kInvalidArgument, "rank %d is out of range for nranks %d (0 to %d)", rank,
                nranks, nranks - 1);
  }
  if (payload.size() > kMaxBootstrapPayloadBytes) {
    return fail(Result::kInvalidArgument,
                "bootstrap payload of %zu bytes exceeds the %u-byte limit", payload.size(),
                kMaxBootstrapPayloadBytes);
  }
  return Result::kSuccess;
}

// One attempt: what came of it, and whether to connect again. The root closes a connection
// without answering only when it dropped it (pushed out by a flood), never after admitting it.
enum class Attempt { kDone, kClosedEarly };

Result read_reply(const Socket& socket, const BootstrapKey& key, const uint8_t* nonce, int rank,
                  int nranks, const Deadline& deadline, Attempt* attempt,
                  std::vector<std::vector<uint8_t>>* table) {
  const std::string root = socket.peer_address().to_string();
  uint8_t head[kBootstrapReplyHeaderBytes];
  bool closed = false;
  TERSE_CHECK(socket.recv_all(head, sizeof(head), deadline, "the bootstrap reply", &closed));
  if (closed) {
    *attempt = Attempt::kClosedEarly;
    return Result::kSuccess;
  }
  BootstrapReplyHeader header = decode_reply_header(head);
  std::string wrong = check_reply_header(header, nranks);
  if (!wrong.empty()) {
    return fail(Result::kRemoteError, "rank %d: the bootstrap root at %s sent %s", rank,
                root.c_str(), wrong.c_str());
  }
  std::vector<uint8_t> body(header.body_bytes);
  TERSE_CHECK(
      socket.recv_all(body.data(), body.size(), deadline, "the bootstrap reply's body", &closed));
  if (closed) {
    return fail(Result::kRemoteError,
                "rank %d: the bootstrap root at %s closed the connection inside "
                "its reply",
                rank, root.c_str());
  }
  uint8_t digest[kBootstrapDigestBytes];
  bootstrap_digest(body.data(), body.size(), digest);
  uint8_t expected[kBootstrapMacBytes];
  reply_mac(key, nonce, header, digest, expected);
  if (!bootstrap_mac_equal(expected, header.mac)) {
    return fail(
        Result::kRemoteError,
        "rank %d: the reply from the bootstrap root at %s does not authenticate: the root and this "
        "rank derive different bootstrap keys (the unique id is stale or another job's, "
        "so its secret differs, or TERSE_COMM_SECRET differs between ranks)",
        rank, root.c_str());
  }
  // check_reply_header accepted the status: one of Result's codes.
  const Result status = Result::from_code(static_cast<int>(header.status));
  if (!status.ok()) {
    std::string message(body.begin(), body.end());
    return fail(status, "bootstrap root refused rank %d: %s", rank, message.c_str());
  }
  if (!decode_payload_table(body.data(), body.size(), nranks, table)) {
    return fail(Result::kRemoteError, "the rank table from the bootstrap root at %s is malformed",
                root.c_str());
  }
  return Result::kSuccess;
}

// Connects, answers the challenge and reads the reply.
Result attempt_rendezvous(const UniqueIdFields& fields, const BootstrapKey& key, int rank,
                          int nranks, const std::vector<uint8_t>& payload,
                          const Deadline& connect_deadline, const Deadline& reply_deadline,
                          Attempt* attempt, std::vector<std::vector<uint8_t>>* table) {
  Socket socket;
  // A root this process started and that gave up will not come back: no use retrying.
  TERSE_CHECK(Socket::connect(fields.root, connect_deadline, &socket,
                              [&] { return check_root_kept_here(fields.root); }));
  uint8_t challenge_bytes[kBootstrapChallengeBytes];
  bool closed = false;
  TERSE_CHECK(socket.recv_all(challenge_bytes, sizeof(challenge_bytes), connect_deadline,
                              "the bootstrap challenge", &closed));
  if (closed) {
    *attempt = Attempt::kClosedEarly;
    return Result::kSuccess;
  }
  BootstrapChallenge challenge = decode_challenge(challenge_bytes);
  if (challenge.magic != kBootstrapChallengeMagic || challenge.version != kBootstrapVersion) {
    return fail(Result::kRemoteError,
                "rank %d: %s is not a terse bootstrap root of this version (it sent magic "
                "0x%08x, version %u); do all ranks run the same terse build?",
                rank, fields.root.to_string().c_str(), challenge.magic, challenge.version);
  }
  BootstrapHello hello;
  hello.rank = static_cast<uint32_t>(rank);
  hello.nranks = static_cast<uint32_t>(nranks);
  hello.payload_bytes = static_cast<uint32_t>(payload.size());
  hello_mac(key, challenge.nonce, hello, payload.data(), hello.mac);
  std::vector<uint8_t> message = encode_hello(hello);
  message.insert(message.end(), payload.begin(), payload.end());
  TERSE_CHECK(socket.send_all(message.data(), message.size(), connect_deadline, "the hello"));
  return read_reply(socket, key, challenge.nonce, rank, nranks, reply_deadline, attempt, table);
}

}  // namespace

Result bootstrap_allgather(const UniqueId& id, int rank, int nranks,
                           const std::vector<uint8_t>& payload, double timeout_seconds,
                           std::vector<std::vector<uint8_t>>* table) {
  TERSE_CHECK(check_arguments(rank, nranks, payload));
  UniqueIdFields fields;
  TERSE_CHECK(decode_unique_id(id, &fields));
  BootstrapKey key;
  TERSE_CHECK(derive_bootstrap_key(fields.secret, &key));
  Deadline connect_deadline = Deadline::after_seconds(timeout_seconds);
  Deadline reply_deadline = Deadline::after_seconds(timeout_seconds + kReplyGraceSeconds);

  // Rank 0 serves the rendezvous NCCL_COMM_ID names; the root lives until everyone is answered.
  std::unique_ptr<BootstrapRoot> own_root;
  if (fields.root_started_by_rank_zero && rank == 0) {
    if (BootstrapRoot::start(fields.root, fields.secret, timeout_seconds, &own_root) !=
        Result::kSuccess) {
      return fail(Result::kSystemError,
                  "rank 0 must start the bootstrap root at %s, the address TERSE_COMM_ID / "
                  "NCCL_COMM_ID names, and cannot (%s); is that an address of this host, and is "
                  "the port free?",
                  fields.root.to_string().c_str(), last_error());
    }
  }

  Result result = Result::kSuccess;
  for (int attempts = 1;; ++attempts) {
    Attempt attempt = Attempt::kDone;
    result = attempt_rendezvous(fields, key, rank, nranks, payload, connect_deadline,
                                reply_deadline, &attempt, table);
    if (result != Result::kSuccess || attempt == Attempt::kDone) break;
    // Dropped before an answer: the root was flooded, or is gone. Again, while time is left.
    if (connect_deadline.expired()) {
      result = fail(Result::kRemoteError,
                    "rank %d: the bootstrap root at %s closed the connection without an answer "
                    "%d times until the deadline (TERSE_TIMEOUT_S)",
                    rank, fields.root.to_string().c_str(), attempts);
      break;
    }
    TERSE_INFO(
        "rank %d: the bootstrap root closed the connection before answering; connecting "
        "again",
        rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // let the flood pass a little
  }
  if (result == Result::kSuccess && (*table)[rank] != payload) {
    result = fail(Result::kInternalError,
                  "the rank table from the bootstrap root does not hold rank %d's own payload at "
                  "its place",
                  rank);
  }
  // Rank 0 serves the others until each has its answer (the table, or why the rendezvous
  // failed); stopping the root earlier would leave them to time out without a reason.
  if (own_root != nullptr && !own_root->wait_finished(reply_deadline)) {
    TERSE_WARN("bootstrap root (rank 0) had not answered every rank by the deadline");
  }
  if (result == Result::kSuccess) {
    TERSE_TRACE("bootstrap: rank %d of %d received the rank table", rank, nranks);
  }
  return result;
}

}  // namespace terse
