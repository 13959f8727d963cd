#include "transport/bootstrap_client.h"

#include <algorithm>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/result.h"
#include "transport/bootstrap_messages.h"
#include "transport/bootstrap_root.h"
#include "transport/deadline.h"
#include "transport/socket.h"

namespace terse {
namespace {

constexpr double kReplyGraceSeconds = 5.0;
constexpr uint64_t kMaxErrorBytes = 4096;

ncclResult_t check_arguments(int rank, int nranks, const std::vector<uint8_t>& payload) {
  if (nranks < 1 || nranks > kMaxBootstrapRanks) {
    return fail(ncclInvalidArgument, "nranks %d is out of range (1 to %d)", nranks,
                kMaxBootstrapRanks);
  }
  if (rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "rank %d is out of range for nranks %d (0 to %d)", rank,
                nranks, nranks - 1);
  }
  if (payload.size() > kMaxBootstrapPayloadBytes) {
    return fail(ncclInvalidArgument, "bootstrap payload of %zu bytes exceeds the %u-byte limit",
                payload.size(), kMaxBootstrapPayloadBytes);
  }
  return ncclSuccess;
}

ncclResult_t read_reply(const Socket& socket, int rank, int nranks, const Deadline& deadline,
                        std::vector<std::vector<uint8_t>>* table) {
  const std::string root = socket.peer_address().to_string();
  uint8_t head[kBootstrapReplyHeaderBytes];
  if (socket.recv_all(head, sizeof(head), deadline, "the bootstrap reply") != ncclSuccess) {
    return fail(ncclRemoteError,
                "rank %d got no reply from the bootstrap root at %s (%s); the root drops ranks "
                "that present a wrong secret, so the unique id may be stale or another job's",
                rank, root.c_str(), last_error());
  }
  BootstrapReplyHeader header = decode_reply_header(head);
  if (header.magic != kBootstrapReplyMagic) {
    return fail(ncclRemoteError,
                "the bootstrap root at %s answered with magic 0x%08x, not a "
                "terse reply",
                root.c_str(), header.magic);
  }
  if (header.status != ncclSuccess) {
    std::string message(std::min(header.body_bytes, kMaxErrorBytes), '\0');
    TERSE_CHECK(socket.recv_all(message.data(), message.size(), deadline, "the bootstrap error"));
    // Only codes the root can send are passed on; anything else means a garbled reply.
    ncclResult_t code = header.status > ncclSuccess && header.status <= ncclInProgress
                            ? header.status
                            : ncclRemoteError;
    return fail(code, "bootstrap root refused rank %d: %s", rank, message.c_str());
  }
  uint64_t limit = static_cast<uint64_t>(nranks) * (4 + kMaxBootstrapPayloadBytes);
  if (header.body_bytes > limit) {
    return fail(ncclRemoteError,
                "the bootstrap root at %s announced a %llu-byte rank table, more than %d ranks "
                "can fill",
                root.c_str(), static_cast<unsigned long long>(header.body_bytes), nranks);
  }
  std::vector<uint8_t> body(header.body_bytes);
  TERSE_CHECK(socket.recv_all(body.data(), body.size(), deadline, "the rank table"));
  if (!decode_payload_table(body, nranks, table)) {
    return fail(ncclRemoteError, "the rank table from the bootstrap root at %s is malformed",
                root.c_str());
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t bootstrap_allgather(const UniqueId& id, int rank, int nranks,
                                 const std::vector<uint8_t>& payload, double timeout_seconds,
                                 std::vector<std::vector<uint8_t>>* table) {
  TERSE_CHECK(check_arguments(rank, nranks, payload));
  UniqueIdFields fields;
  TERSE_CHECK(decode_unique_id(id, &fields));
  Deadline connect_deadline = Deadline::after_seconds(timeout_seconds);
  Deadline reply_deadline = Deadline::after_seconds(timeout_seconds + kReplyGraceSeconds);

  // Rank 0 serves the rendezvous NCCL_COMM_ID names; the root lives until everyone is answered.
  std::unique_ptr<BootstrapRoot> own_root;
  if (fields.root_started_by_rank_zero && rank == 0) {
    if (BootstrapRoot::start(fields.root, fields.secret, timeout_seconds, &own_root) !=
        ncclSuccess) {
      return fail(ncclSystemError,
                  "rank 0 must start the bootstrap root at %s, the address TERSE_COMM_ID / "
                  "NCCL_COMM_ID names, and cannot (%s); is that an address of this host, and is "
                  "the port free?",
                  fields.root.to_string().c_str(), last_error());
    }
  }

  Socket socket;
  if (ncclResult_t connected = Socket::connect(fields.root, connect_deadline, &socket)) {
    return connected;
  }
  BootstrapHello hello;
  hello.secret = fields.secret;
  hello.rank = static_cast<uint32_t>(rank);
  hello.nranks = static_cast<uint32_t>(nranks);
  hello.payload_bytes = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> message = encode_hello(hello);
  message.insert(message.end(), payload.begin(), payload.end());
  ncclResult_t result =
      socket.send_all(message.data(), message.size(), connect_deadline, "the hello");
  if (result == ncclSuccess) result = read_reply(socket, rank, nranks, reply_deadline, table);
  if (result == ncclSuccess && (*table)[rank] != payload) {
    result = fail(ncclInternalError,
                  "the rank table from the bootstrap root does not hold rank %d's own payload at "
                  "its place",
                  rank);
  }
  // Rank 0 serves the others until each has its answer (the table, or why the rendezvous
  // failed); stopping the root earlier would leave them to time out without a reason.
  if (own_root != nullptr && !own_root->wait_finished(reply_deadline)) {
    TERSE_WARN("bootstrap root (rank 0) had not answered every rank by the deadline");
  }
  if (result == ncclSuccess) {
    TERSE_TRACE("bootstrap: rank %d of %d received the rank table", rank, nranks);
  }
  return result;
}

}  // namespace terse
