// The owner's side of the parameter server: the tensors this rank serves, each client's requests
// heard and applied in that client's order (sends, receives, clocks), and the owner's replies.
#include "ps/ps_server.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/result.h"
#include "ps/ps_server_internal.h"
#include "ps/ps_validation.h"
#include "ps/shard_update.h"

namespace terse {
namespace {

// A refused request's payload is drained into at most this much: a longer message is consumed
// as truncated, which is all a drain needs.
constexpr size_t kDrainBytes = 256;

}  // namespace

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

void PsServer::post_header_receive(int client) {
  Client& state = clients_[size_t(client)];
  if (transport_->recv(client, ps_header_operation(), &state.header_buffer,
                       sizeof(state.header_buffer), &state.header_receive) != ncclSuccess) {
    TERSE_WARN("rank %d: parameter server: cannot listen to rank %d any more: %s", rank_, client,
               last_error());
    state.failed = true;
  }
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

}  // namespace terse
