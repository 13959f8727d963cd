#include "ps/ps_server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/exception_guard.h"
#include "common/log.h"
#include "common/result.h"
#include "common/thread_name.h"
#include "ps/ps_validation.h"
#include "ps/shard_update.h"

namespace terse {
namespace {

constexpr int kSleepMs = 1;
// How often in-flight messages are checked against their deadlines and their owners' health
// (a /proc read per owner), and so how often the thread wakes while any are in flight.
constexpr auto kFailureCheckInterval = std::chrono::milliseconds(10);
constexpr int kFailureCheckMs = 10;
// A refused request's payload is drained into at most this much: a longer message is consumed
// as truncated, which is all a drain needs.
constexpr size_t kDrainBytes = 256;
// After the transport closed, how long the last cancelled transfers get to end before their
// buffers are deliberately leaked rather than freed under UCX.
constexpr double kFinalSettleSeconds = 1.0;
// The tag layout's communicator field of the server's transport: apart from the communicator's
// own (a second guard, since the workers are apart already).
constexpr uint16_t kServerTagSalt = 0x5053;  // "PS"

bool in_progress(TransferRequest& request) {
  return request.posted() && request.status() == UCS_INPROGRESS;
}

bool failed(TransferRequest& request) {
  if (!request.posted()) return false;
  const ucs_status_t status = request.status();
  return status != UCS_INPROGRESS && status != UCS_OK;
}

// A message may be freed only once none of its transfers can touch its buffers.
bool transfers_done(PsClientMessage& message) {
  return !in_progress(message.header_send) && !in_progress(message.payload_send) &&
         !in_progress(message.reply_receive);
}

// The results an owner may send; anything else from the wire is a remote failure.
bool known_result(int32_t result) {
  return result >= int32_t(ncclSuccess) && result <= int32_t(ncclRemoteError);
}

}  // namespace

ncclResult_t PsServer::create(Transport* control, std::unique_ptr<PsServer>* out) {
  std::unique_ptr<PsServer> server(new PsServer());
  server->rank_ = control->rank();
  server->nranks_ = control->nranks();
  server->load_.assign(size_t(server->nranks_), 0);
  // The new workers' addresses differ in length: their lengths first, then each padded to the
  // longest, over the communicator's fixed-size allgather.
  const Transport::PeerExchange exchange =
      [control](const std::vector<uint8_t>& mine,
                std::vector<std::vector<uint8_t>>* table) -> ncclResult_t {
    const int nranks = control->nranks();
    const uint64_t length = mine.size();
    std::vector<uint64_t> lengths(static_cast<size_t>(nranks), 0);
    TERSE_CHECK(control->allgather(&length, sizeof(length), lengths.data()));
    const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<uint8_t> padded(longest, 0), all(longest * size_t(nranks));
    std::memcpy(padded.data(), mine.data(), mine.size());
    TERSE_CHECK(control->allgather(padded.data(), longest, all.data()));
    table->assign(size_t(nranks), {});
    for (int rank = 0; rank < nranks; ++rank) {
      const uint8_t* start = all.data() + longest * size_t(rank);
      (*table)[size_t(rank)].assign(start, start + lengths[size_t(rank)]);
    }
    return ncclSuccess;
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

void PsServer::add_tensor(std::shared_ptr<PsTensor> tensor) {
  std::lock_guard<std::mutex> lock(tensors_mutex_);
  tensors_[tensor->id] = std::move(tensor);
}

void PsServer::remove_tensor(uint32_t id) {
  std::lock_guard<std::mutex> lock(tensors_mutex_);
  tensors_.erase(id);
}

std::shared_ptr<PsTensor> PsServer::find_tensor(uint32_t id) {
  std::lock_guard<std::mutex> lock(tensors_mutex_);
  auto found = tensors_.find(id);
  return found == tensors_.end() ? nullptr : found->second;
}

void PsServer::submit(std::vector<std::unique_ptr<PsClientMessage>> messages) {
  {
    std::lock_guard<std::mutex> lock(submissions_mutex_);
    for (auto& message : messages) submissions_.push_back(std::move(message));
  }
  wake();
}

void PsServer::post_header_receive(int client) {
  Client& state = clients_[size_t(client)];
  if (transport_->recv(client, ps_header_operation(), &state.header_buffer,
                       sizeof(state.header_buffer), &state.header_receive) != ncclSuccess) {
    TERSE_WARN("rank %d: parameter server: cannot listen to rank %d any more: %s", rank_, client,
               last_error());
    state.failed = true;
  }
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

bool PsServer::take_submissions() {
  std::vector<std::unique_ptr<PsClientMessage>> taken;
  {
    std::lock_guard<std::mutex> lock(submissions_mutex_);
    taken.swap(submissions_);
  }
  for (auto& message : taken) {
    const uint32_t sequence = message->header.sequence;
    // The answer's receive first, so that it is posted before the owner can send it.
    ncclResult_t result =
        transport_->recv(message->owner, ps_reply_operation(sequence), message->reply.data(),
                         message->reply.size(), &message->reply_receive);
    if (result == ncclSuccess) {
      result = transport_->send(message->owner, ps_header_operation(), &message->header,
                                sizeof(message->header), &message->header_send);
    }
    if (result == ncclSuccess && !message->payload.empty()) {
      result =
          transport_->send(message->owner, ps_payload_operation(sequence), message->payload.data(),
                           message->payload.size(), &message->payload_send);
    }
    if (result != ncclSuccess) {
      message->request->finish_part(result, describe(*message) + ": " + last_error());
      // Kept (reap) until the reply receive, cancelled here, and any send posted have ended.
      if (message->reply_receive.posted()) transport_->cancel(&message->reply_receive);
      abandoned_.push_back(std::move(message));
    } else {
      in_flight_.push_back(std::move(message));
    }
  }
  return !taken.empty();
}

bool PsServer::serve_clients() {
  bool busy = false;
  for (int client = 0; client < nranks_; ++client) {
    Client& state = clients_[size_t(client)];
    if (!state.failed && state.header_receive.posted() &&
        state.header_receive.status() != UCS_INPROGRESS) {
      busy = true;
      const ucs_status_t status = state.header_receive.status();
      const size_t received = state.header_receive.received_bytes();
      state.header_receive = TransferRequest();
      if (status == UCS_ERR_MESSAGE_TRUNCATED) {
        // A message larger than a header (UCX consumed it): the client is not at fault for
        // what follows, so it stays heard.
        TERSE_WARN("rank %d: parameter server: dropped an oversized request from rank %d", rank_,
                   client);
        post_header_receive(client);
      } else if (status != UCS_OK) {
        TERSE_INFO("rank %d: parameter server: rank %d's requests end: %s", rank_, client,
                   ucs_status_string(status));
        state.failed = true;
        peer_failed_ = true;
      } else {
        auto incoming = std::make_unique<Incoming>();
        incoming->header = state.header_buffer;
        incoming->deadline = Deadline::after_seconds(timeout_seconds_);
        post_header_receive(client);
        const PsRequestHeader& header = incoming->header;
        size_t payload_bytes = 0;
        if (received != sizeof(PsRequestHeader) || header.magic != kPsRequestMagic) {
          // Without a trusted sequence there is nothing to answer or drain.
          TERSE_WARN("rank %d: parameter server: dropped a malformed request from rank %d", rank_,
                     client);
          continue;
        }
        std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
        if (!validate_request(header, tensor.get(), rank_, &payload_bytes, &incoming->refusal,
                              &incoming->why)) {
          // Refused in the client's order, once its payload (if any) is drained: left
          // behind, it would match a later request's receive once the tag's sequence wraps.
          incoming->refused = true;
          payload_bytes = size_t(std::min<uint64_t>(header.payload_bytes, kDrainBytes));
        }
        if (payload_bytes > 0) {
          incoming->payload.resize(payload_bytes);
          if (transport_->recv(client, ps_payload_operation(header.sequence),
                               incoming->payload.data(), payload_bytes,
                               &incoming->payload_receive) != ncclSuccess) {
            reply(client, header, ncclRemoteError, last_error());
            continue;
          }
        }
        state.queue.push_back(std::move(incoming));
      }
    }
    // Applied strictly in the client's order: the head waits for its payload, until its
    // deadline (a client that stopped mid-message must not hold the owner's memory forever).
    while (!state.queue.empty()) {
      Incoming& head = *state.queue.front();
      if (in_progress(head.payload_receive)) {
        if (!head.deadline.expired()) break;
        transport_->cancel(&head.payload_receive);
        transport_->progress();
        if (in_progress(head.payload_receive)) {
          // Matched and still streaming: it may write into the payload until it ends.
          reply(client, head.header, ncclRemoteError,
                "the request's payload did not arrive within TERSE_TIMEOUT_S");
          abandoned_incoming_.push_back(std::move(state.queue.front()));
          state.queue.pop_front();
          busy = true;
          continue;
        }
      }
      busy = true;
      std::unique_ptr<Incoming> taken = std::move(state.queue.front());
      state.queue.pop_front();
      finish_incoming(client, std::move(taken));
    }
  }
  return busy;
}

void PsServer::finish_incoming(int client, std::unique_ptr<Incoming> head) {
  if (head->refused) {
    reply(client, head->header, head->refusal, head->why);
    return;
  }
  if (head->payload_receive.posted()) {
    const ucs_status_t status = head->payload_receive.status();
    std::string why;
    if (status == UCS_ERR_MESSAGE_TRUNCATED) {
      reply(client, head->header, ncclInvalidUsage,
            "the request's payload was longer than its header announced");
      return;
    }
    if (status != UCS_OK) {
      reply(
          client, head->header, ncclRemoteError,
          std::string("the request's payload did not arrive (") + ucs_status_string(status) + ")");
      return;
    }
    if (!validate_payload(head->header, head->payload.data(),
                          head->payload_receive.received_bytes(), &why)) {
      reply(client, head->header, ncclInvalidUsage, why);
      return;
    }
  }
  apply(client, head.get());
}

void PsServer::apply(int client, Incoming* request) {
  const PsRequestHeader& header = request->header;
  std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
  // Checked again against the tensor as it is now (the header was checked on arrival; a free
  // may have come between), payload size included, before anything is indexed or copied.
  size_t payload_bytes = 0;
  ncclResult_t refusal = ncclSuccess;
  std::string why;
  if (!validate_request(header, tensor.get(), rank_, &payload_bytes, &refusal, &why) ||
      request->payload.size() != payload_bytes) {
    reply(client, header, refusal != ncclSuccess ? refusal : ncclInvalidUsage,
          why.empty() ? "the payload's size changed" : why);
    return;
  }
  std::vector<uint8_t>& shard = tensor->storage[header.shard];
  const size_t count = tensor->shards[header.shard].count;
  const uint8_t* values =
      request->payload.data() + (payload_bytes > 0 ? sizeof(PsPayloadPrefix) : 0);
  const size_t value_bytes = payload_bytes > 0 ? payload_bytes - sizeof(PsPayloadPrefix) : 0;
  switch (PsRequestKind(header.kind)) {
    case PsRequestKind::kSend: {
      std::string failure;
      const ncclResult_t result = apply_push(
          header.rule, PsEncoding(header.encoding), values, value_bytes, tensor->push_decoder.get(),
          tensor->codec_dtype, tensor->type, count, shard.data(), shard.size(), &failure);
      reply(client, header, result, failure);
      return;
    }
    case PsRequestKind::kReceive: {
      if (tensor->receive_codec == nullptr) {
        reply(client, header, ncclSuccess, "", shard);
        return;
      }
      std::vector<uint8_t> message(
          tensor->receive_codec->max_encoded_bytes(count, tensor->codec_dtype));
      size_t bytes = 0;
      EncodeContext context;
      context.seed = (uint64_t(header.tensor) << 32) ^ header.sequence;
      if (tensor->receive_codec->encode(shard.data(), count, tensor->codec_dtype, context,
                                        message.data(), message.size(), &bytes) != ncclSuccess) {
        reply(client, header, ncclInternalError,
              std::string("encoding the shard failed: ") + last_error());
        return;
      }
      message.resize(bytes);
      reply(client, header, ncclSuccess, "", std::move(message), PsEncoding::kCodec);
      return;
    }
    case PsRequestKind::kClock:
      if (header.clock < tensor->clocks[size_t(client)]) {
        reply(client, header, ncclInvalidArgument,
              "clock " + std::to_string(header.clock) + " is behind rank " +
                  std::to_string(client) + "'s last, " +
                  std::to_string(tensor->clocks[size_t(client)]));
        return;
      }
      tensor->clocks[size_t(client)] = header.clock;
      clock_waiters_.push_back(ClockWaiter{client, header, request->deadline});
      answer_clocks(tensor.get());
      return;
  }
  reply(client, header, ncclInvalidArgument,
        "unknown request kind " + std::to_string(int(header.kind)));
}

void PsServer::answer_clocks(PsTensor* tensor) {
  const uint64_t slowest = *std::min_element(tensor->clocks.begin(), tensor->clocks.end());
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    const PsRequestHeader& header = waiter->header;
    // Waits while the slowest is more than `staleness` steps behind (written so that no
    // staleness, UINT64_MAX included, overflows).
    if (header.tensor == tensor->id &&
        (header.clock <= slowest || header.clock - slowest <= header.staleness)) {
      reply(waiter->client, header, ncclSuccess, "");
      waiter = clock_waiters_.erase(waiter);
    } else {
      ++waiter;
    }
  }
}

void PsServer::fail_clocks_held_by_failed_ranks() {
  // A waiter whose client has given up (its deadline passed) goes: nobody waits for its answer.
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    waiter = waiter->deadline.expired() ? clock_waiters_.erase(waiter) : std::next(waiter);
  }
  std::vector<int> failed_ranks;
  for (int rank = 0; rank < nranks_; ++rank) {
    if (rank != rank_ && transport_->peer_failed(rank)) failed_ranks.push_back(rank);
  }
  if (failed_ranks.empty()) return;
  peer_failed_ = true;
  for (auto waiter = clock_waiters_.begin(); waiter != clock_waiters_.end();) {
    const PsRequestHeader& header = waiter->header;
    std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
    int culprit = -1;
    for (int rank : failed_ranks) {
      const uint64_t held = tensor != nullptr ? tensor->clocks[size_t(rank)] : 0;
      if (tensor != nullptr && header.clock > held && header.clock - held > header.staleness) {
        culprit = rank;
      }
    }
    if (culprit < 0) {
      ++waiter;
      continue;
    }
    reply(waiter->client, header, ncclRemoteError,
          "rank " + std::to_string(culprit) + " failed at clock " +
              std::to_string(tensor->clocks[size_t(culprit)]) + ", so clock " +
              std::to_string(header.clock) + " with staleness " + std::to_string(header.staleness) +
              " can never be reached");
    waiter = clock_waiters_.erase(waiter);
  }
}

void PsServer::reply(int client, const PsRequestHeader& header, ncclResult_t result,
                     const std::string& message, std::vector<uint8_t> payload,
                     PsEncoding encoding) {
  PsReplyHeader answer;
  answer.result = int32_t(result);
  answer.sequence = header.sequence;
  answer.encoding = uint8_t(encoding);
  answer.payload_bytes = payload.size();
  std::snprintf(answer.message, sizeof(answer.message), "%s", message.c_str());
  replies_.emplace_back();
  Reply& out = replies_.back();
  out.bytes.resize(sizeof(answer) + payload.size());
  std::memcpy(out.bytes.data(), &answer, sizeof(answer));
  if (!payload.empty())
    std::memcpy(out.bytes.data() + sizeof(answer), payload.data(), payload.size());
  if (transport_->send(client, ps_reply_operation(header.sequence), out.bytes.data(),
                       out.bytes.size(), &out.send) != ncclSuccess) {
    TERSE_INFO("rank %d: parameter server: cannot answer rank %d: %s", rank_, client, last_error());
  }
}

ncclResult_t PsServer::take_answer(PsClientMessage* message, std::string* why) {
  const size_t received = message->reply_receive.received_bytes();
  PsReplyHeader answer;
  if (received < sizeof(answer)) {
    *why = describe(*message) + ": a truncated answer";
    return ncclRemoteError;
  }
  std::memcpy(&answer, message->reply.data(), sizeof(answer));
  answer.message[sizeof(answer.message) - 1] = '\0';
  if (answer.magic != kPsReplyMagic || answer.sequence != message->header.sequence ||
      answer.payload_bytes != received - sizeof(answer)) {
    *why = describe(*message) + ": a malformed answer";
    return ncclRemoteError;
  }
  PsTrafficCounters& traffic = message->tensor->traffic;
  traffic.header_bytes += sizeof(answer);
  if (answer.result != ncclSuccess) {
    *why = describe(*message) + " was refused: " + answer.message;
    // A result this library never sends is a broken owner, not a refusal.
    return known_result(answer.result) ? ncclResult_t(answer.result) : ncclRemoteError;
  }
  if (PsRequestKind(message->header.kind) != PsRequestKind::kReceive) return ncclSuccess;
  PsTensor& tensor = *message->tensor;
  const size_t count = tensor.shards[message->header.shard].count;
  const uint8_t* values = message->reply.data() + sizeof(answer);
  // The caller's tensor is written only while its request is still waited for: one given up
  // (PsRequest::give_up, the server thread stalled past the deadline) may be freed already.
  ncclResult_t result = ncclSuccess;
  const bool live = message->request->while_waited(
      [&] { result = write_answer(message, answer, values, count, why); });
  if (!live) {
    *why = describe(*message) + ": the answer came after the request was given up";
    return ncclRemoteError;
  }
  if (result == ncclSuccess) {
    traffic.receive_bytes += answer.payload_bytes;
    traffic.receive_uncompressed_bytes += count * tensor.element_bytes;
  }
  return result;
}

ncclResult_t PsServer::write_answer(PsClientMessage* message, const PsReplyHeader& answer,
                                    const uint8_t* values, size_t count, std::string* why) {
  PsTensor& tensor = *message->tensor;
  if (answer.encoding == uint8_t(PsEncoding::kCodec) && tensor.receive_codec != nullptr) {
    if (tensor.receive_codec->decode(values, answer.payload_bytes, message->destination, count,
                                     tensor.codec_dtype, /*accumulate=*/false,
                                     DecodeContext{}) != ncclSuccess) {
      *why = describe(*message) + ": the compressed answer did not decode: " + last_error();
      return ncclRemoteError;
    }
    return ncclSuccess;
  }
  if (answer.encoding != uint8_t(PsEncoding::kRaw) ||
      answer.payload_bytes != count * tensor.element_bytes) {
    *why = describe(*message) + ": an answer of the wrong size";
    return ncclRemoteError;
  }
  std::memcpy(message->destination, values, answer.payload_bytes);
  return ncclSuccess;
}

bool PsServer::finish_client_messages(bool check_failures) {
  bool busy = false;
  // peer_failed reads /proc: once per owner and pass, not once per message.
  std::vector<int8_t> owner_failed;
  if (check_failures) owner_failed.assign(size_t(nranks_), -1);
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    PsClientMessage& message = **it;
    std::string why;
    ncclResult_t result = ncclSuccess;
    bool finished = false;
    if (!in_progress(message.reply_receive)) {
      finished = true;
      if (failed(message.reply_receive)) {
        result = ncclRemoteError;
        why = describe(message) + ": the answer's receive failed (" +
              ucs_status_string(message.reply_receive.status()) + ")";
      } else {
        result = take_answer(&message, &why);
      }
    } else if (failed(message.header_send) || failed(message.payload_send)) {
      finished = true;
      result = ncclRemoteError;
      why = describe(message) + ": the request could not be sent to rank " +
            std::to_string(message.owner);
    } else if (check_failures) {
      int8_t& dead = owner_failed[size_t(message.owner)];
      if (dead < 0) dead = transport_->peer_failed(message.owner) ? 1 : 0;
      if (dead == 1) {
        finished = true;
        result = ncclRemoteError;
        peer_failed_ = true;
        why = describe(message) + ": its owner, rank " + std::to_string(message.owner) +
              ", failed (the transport reports it dead)";
      } else if (message.deadline.expired()) {
        finished = true;
        result = ncclRemoteError;
        char text[160];
        std::snprintf(text, sizeof(text),
                      ": rank %d did not answer within TERSE_TIMEOUT_S=%.0f s (dead, hung or "
                      "stopped)",
                      message.owner, timeout_seconds_);
        why = describe(message) + text;
      }
    }
    if (!finished) {
      ++it;
      continue;
    }
    busy = true;
    message.request->finish_part(result, why);
    // An answer that never came: its receive is cancelled (unmatched, it ends at the next
    // progress; matched, UCX may still stream into `reply`), and the message stays until it and
    // the sends have ended (reap).
    if (in_progress(message.reply_receive)) transport_->cancel(&message.reply_receive);
    abandoned_.push_back(std::move(*it));
    it = in_flight_.erase(it);
  }
  return busy;
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

std::string PsServer::describe(const PsClientMessage& message) const {
  static const char* const kinds[] = {"?", "send", "receive", "clock"};
  const unsigned kind = message.header.kind <= 3 ? message.header.kind : 0;
  return "rank " + std::to_string(rank_) + ": tersePs " + kinds[kind] + " of tensor '" +
         message.tensor->name + "' (shard " + std::to_string(message.header.shard) +
         ", owner rank " + std::to_string(message.owner) + ")";
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
