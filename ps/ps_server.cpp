#include "ps/ps_server.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/exception_guard.h"
#include "common/log.h"
#include "common/result.h"
#include "common/thread_name.h"
#include "ps/shard_update.h"

namespace terse {
namespace {

// Idle passes that only yield before the thread sleeps on the worker's events: a request that
// is about to be answered arrives within them.
constexpr unsigned kYieldPasses = 64;
constexpr int kSleepMs = 1;
// How often in-flight messages are checked against their deadlines and their owners' health.
constexpr auto kFailureCheckInterval = std::chrono::milliseconds(10);
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

}  // namespace

ncclResult_t PsServer::create(Transport* control, std::unique_ptr<PsServer>* out) {
  std::unique_ptr<PsServer> server(new PsServer());
  server->rank_ = control->rank();
  server->nranks_ = control->nranks();
  server->load_.assign(size_t(server->nranks_), 0);
  // The new workers' addresses differ in length: their lengths first, then each padded to the
  // longest, over the communicator's fixed-size allgather.
  const Transport::PeerExchange exchange = [control](const std::vector<uint8_t>& mine,
                                                     std::vector<std::vector<uint8_t>>* table) {
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
  if (thread_.joinable()) thread_.join();
  // Every message has finished or been cancelled by now; a peer that failed gets no flush.
  if (peer_failed_) {
    transport_->abort();
  } else {
    transport_->close();
  }
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
  std::lock_guard<std::mutex> lock(submissions_mutex_);
  for (auto& message : messages) submissions_.push_back(std::move(message));
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
  unsigned idle_passes = 0;
  auto next_check = Deadline::Clock::now();
  while (!stop_.load()) {
    bool busy = take_submissions();
    busy = transport_->progress() != 0 || busy;
    busy = serve_clients() || busy;
    const auto now = Deadline::Clock::now();
    const bool check = now >= next_check;
    if (check) next_check = now + kFailureCheckInterval;
    busy = finish_client_messages(check) || busy;
    if (check && !clock_waiters_.empty()) fail_clocks_held_by_failed_ranks();
    busy = reap() || busy;
    if (busy) {
      idle_passes = 0;
    } else if (++idle_passes < kYieldPasses) {
      sched_yield();
    } else {
      transport_->wait_for_event(kSleepMs);
    }
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
      abandoned_.push_back(std::move(message));
    } else {
      in_flight_.push_back(std::move(message));
    }
  }
  return !taken.empty();
}

bool PsServer::expected_payload(const PsRequestHeader& header, size_t* bytes, std::string* why) {
  *bytes = 0;
  std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
  if (tensor == nullptr) return true;  // refused when applied, with its reason
  if (header.shard >= tensor->shards.size() || tensor->shards[header.shard].owner != rank_) {
    *why = "shard " + std::to_string(header.shard) + " of tensor '" + tensor->name +
           "' is not owned by rank " + std::to_string(rank_);
    return false;
  }
  if (header.kind != uint8_t(PsRequestKind::kSend) || header.rule == 0 /* zero */) return true;
  const size_t shard_bytes = tensor->shard_bytes(header.shard);
  if (header.encoding == uint8_t(PsEncoding::kCodec)) {
    if (tensor->push_decoder == nullptr || header.rule != 2 /* add */) {
      *why = "a compressed payload for a tensor or rule without a push codec";
      return false;
    }
    const size_t limit = tensor->push_decoder->max_encoded_bytes(tensor->shards[header.shard].count,
                                                                 tensor->codec_dtype);
    if (header.payload_bytes > limit) {
      *why = "a compressed payload of " + std::to_string(header.payload_bytes) +
             " bytes, more than the codec's bound of " + std::to_string(limit);
      return false;
    }
    *bytes = header.payload_bytes;
    return true;
  }
  if (header.payload_bytes != shard_bytes) {
    *why = "a payload of " + std::to_string(header.payload_bytes) + " bytes for a shard of " +
           std::to_string(shard_bytes);
    return false;
  }
  *bytes = shard_bytes;
  return true;
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
      if (status != UCS_OK) {
        TERSE_INFO("rank %d: parameter server: rank %d's requests end: %s", rank_, client,
                   ucs_status_string(status));
        state.failed = true;
        peer_failed_ = true;
      } else {
        auto incoming = std::make_unique<Incoming>();
        incoming->header = state.header_buffer;
        post_header_receive(client);
        size_t payload_bytes = 0;
        std::string why;
        if (received != sizeof(PsRequestHeader) || incoming->header.magic != kPsRequestMagic) {
          TERSE_WARN("rank %d: parameter server: dropped a malformed request from rank %d", rank_,
                     client);
        } else if (!expected_payload(incoming->header, &payload_bytes, &why)) {
          reply(client, incoming->header, ncclInvalidUsage, why);
        } else {
          if (payload_bytes > 0) {
            incoming->payload.resize(payload_bytes);
            if (transport_->recv(client, ps_payload_operation(incoming->header.sequence),
                                 incoming->payload.data(), payload_bytes,
                                 &incoming->payload_receive) != ncclSuccess) {
              reply(client, incoming->header, ncclRemoteError, last_error());
              continue;
            }
          }
          state.queue.push_back(std::move(incoming));
        }
      }
    }
    // Applied strictly in the client's order: the head waits for its payload.
    while (!state.queue.empty() && !in_progress(state.queue.front()->payload_receive)) {
      busy = true;
      std::unique_ptr<Incoming> head = std::move(state.queue.front());
      state.queue.pop_front();
      if (failed(head->payload_receive)) {
        reply(client, head->header, ncclRemoteError, "the request's payload did not arrive");
      } else {
        apply(client, head.get());
      }
    }
  }
  return busy;
}

void PsServer::apply(int client, Incoming* request) {
  const PsRequestHeader& header = request->header;
  std::shared_ptr<PsTensor> tensor = find_tensor(header.tensor);
  if (tensor == nullptr) {
    reply(client, header, ncclInvalidUsage,
          "tensor " + std::to_string(header.tensor) +
              " is not (or no longer) initialised on rank " + std::to_string(rank_) +
              " (was it freed?)");
    return;
  }
  std::vector<uint8_t>& shard = tensor->storage[header.shard];
  const size_t count = tensor->shards[header.shard].count;
  switch (PsRequestKind(header.kind)) {
    case PsRequestKind::kSend:
      if (header.rule == 0) {
        std::fill(shard.begin(), shard.end(), 0);
      } else if (header.rule == 1) {
        std::memcpy(shard.data(), request->payload.data(), shard.size());
      } else if (header.encoding == uint8_t(PsEncoding::kCodec)) {
        // Decode validates the whole message before writing: a bad one leaves the shard alone.
        if (tensor->push_decoder->decode(request->payload.data(), request->payload.size(),
                                         shard.data(), count, tensor->codec_dtype,
                                         /*accumulate=*/true, DecodeContext{}) != ncclSuccess) {
          reply(client, header, ncclInvalidArgument,
                std::string("the compressed push did not decode: ") + last_error());
          return;
        }
      } else {
        add_into_shard(shard.data(), request->payload.data(), count, tensor->type);
      }
      reply(client, header, ncclSuccess, "");
      return;
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
      clock_waiters_.push_back(ClockWaiter{client, header});
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
    // Waits while the slowest is more than `staleness` steps behind: slowest + s < clock.
    if (header.tensor == tensor->id && slowest + header.staleness >= header.clock) {
      reply(waiter->client, header, ncclSuccess, "");
      waiter = clock_waiters_.erase(waiter);
    } else {
      ++waiter;
    }
  }
}

void PsServer::fail_clocks_held_by_failed_ranks() {
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
      if (tensor != nullptr && tensor->clocks[size_t(rank)] + header.staleness < header.clock) {
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
  if (answer.result != ncclSuccess) {
    *why = describe(*message) + " was refused: " + answer.message;
    return ncclResult_t(answer.result);
  }
  if (PsRequestKind(message->header.kind) != PsRequestKind::kReceive) return ncclSuccess;
  PsTensor& tensor = *message->tensor;
  const size_t count = tensor.shards[message->header.shard].count;
  const uint8_t* values = message->reply.data() + sizeof(answer);
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
    } else if (check_failures && transport_->peer_failed(message.owner)) {
      finished = true;
      result = ncclRemoteError;
      peer_failed_ = true;
      why = describe(message) + ": its owner, rank " + std::to_string(message.owner) +
            ", failed (the transport reports it dead)";
    } else if (check_failures && message.deadline.expired()) {
      finished = true;
      result = ncclRemoteError;
      char text[160];
      std::snprintf(text, sizeof(text),
                    ": rank %d did not answer within TERSE_TIMEOUT_S=%.0f s (dead, hung or "
                    "stopped)",
                    message.owner, timeout_seconds_);
      why = describe(message) + text;
    }
    if (!finished) {
      ++it;
      continue;
    }
    busy = true;
    message.request->finish_part(result, why);
    // A receive whose owner never answered is cancelled here (unmatched, it ends at once); the
    // sends end on their own, or when the transport closes.
    message.reply_receive = TransferRequest();
    abandoned_.push_back(std::move(*it));
    it = in_flight_.erase(it);
  }
  return busy;
}

bool PsServer::reap() {
  bool busy = false;
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    if (in_progress((*it)->header_send) || in_progress((*it)->payload_send)) {
      ++it;
    } else {
      it = abandoned_.erase(it);
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
    message->reply_receive = TransferRequest();
    abandoned_.push_back(std::move(message));
  }
  in_flight_.clear();
  for (Client& client : clients_) {
    client.header_receive = TransferRequest();  // unmatched: cancelled at once
    for (auto& incoming : client.queue) incoming->payload_receive = TransferRequest();
    client.queue.clear();
  }
  clock_waiters_.clear();
  // Answers and requests already sent get a moment to leave before the transport closes.
  const Deadline settle = Deadline::after_seconds(peer_failed_ ? 0.2 : 2.0);
  while (!settle.expired() && (!abandoned_.empty() || !replies_.empty())) {
    if (transport_->progress() == 0) transport_->wait_for_event(kSleepMs);
    reap();
  }
}

}  // namespace terse
