// tersePsSend, tersePsReceive and tersePsClock on the client: each request made into one message
// per owner for the server thread to carry (PsServer::submit), a compressed push encoded here
// under error feedback.
#include "ps/parameter_server.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "common/counter_rng.h"
#include "common/result.h"

namespace terse {
namespace {

std::unique_ptr<PsClientMessage> new_message(const PsHandle& handle, size_t shard,
                                             PsRequestKind kind,
                                             const std::shared_ptr<PsRequest>& request) {
  auto message = std::make_unique<PsClientMessage>();
  message->owner = handle.tensor->shards[shard].owner;
  message->header.kind = uint8_t(kind);
  message->header.tensor = handle.tensor->id;
  message->header.shard = uint32_t(shard);
  message->header.sequence = handle.server->next_sequence();
  message->reply.resize(sizeof(PsReplyHeader));
  message->tensor = handle.tensor;
  message->request = request;
  message->deadline = Deadline::after_seconds(handle.server->timeout_seconds());
  return message;
}

// Shards with elements: a split tensor of fewer rows than ranks leaves some empty.
std::vector<size_t> used_shards(const PsTensor& tensor) {
  std::vector<size_t> used;
  for (size_t shard = 0; shard < tensor.shards.size(); ++shard) {
    if (tensor.shards[shard].count > 0) used.push_back(shard);
  }
  return used;
}

std::shared_ptr<PsRequest> new_request(const PsHandle& handle, size_t parts,
                                       bool end_at_first_failure) {
  return std::make_shared<PsRequest>(
      int(parts), Deadline::after_seconds(handle.server->timeout_seconds()), end_at_first_failure);
}

}  // namespace

ncclResult_t ps_send(const PsHandle& handle, const void* data, PsRule rule,
                     std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  const std::vector<size_t> shards = used_shards(tensor);
  *request = new_request(handle, shards.size(), true);
  // Counted once the messages are submitted (terse.h: tersePsStats).
  uint64_t value_bytes = 0, uncompressed_bytes = 0, header_bytes = 0;
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : shards) {
    auto message = new_message(handle, shard, PsRequestKind::kSend, *request);
    message->header.rule = uint8_t(rule);
    const ShardSpan& span = tensor.shards[shard];
    const uint8_t* slice = rule == PsRule::kZero ? nullptr
                                                 : static_cast<const uint8_t*>(data) +
                                                       span.offset * tensor.element_bytes;
    constexpr size_t prefix = sizeof(PsPayloadPrefix);
    if (rule == PsRule::kAdd && tensor.push_encoder != nullptr) {
      // Error feedback: this push carries what the codec dropped from the previous ones, and the
      // residual keeps what it drops now (Codec::encode_compensated, one pass).
      std::lock_guard<std::mutex> lock(tensor.client_mutex);
      std::vector<float>& residual = tensor.residuals[shard];
      if (residual.empty()) residual.assign(span.count, 0.0f);
      message->payload.resize(
          prefix + tensor.push_encoder->max_encoded_bytes(span.count, tensor.codec_dtype));
      EncodeContext context;
      // A seed of its own per tensor, shard, rank and push (common/counter_rng.h's mix).
      context.seed =
          counter_random(counter_random(tensor.id, shard),
                         counter_random(uint64_t(handle.server->rank()), tensor.pushes[shard]++));
      size_t bytes = 0;
      TERSE_CHECK(tensor.push_encoder->encode_compensated(
          slice, tensor.codec_dtype, residual.data(), span.count, context,
          message->payload.data() + prefix, message->payload.size() - prefix, &bytes));
      message->payload.resize(prefix + bytes);
      message->header.encoding = uint8_t(PsEncoding::kCodec);
    } else if (rule != PsRule::kZero) {
      message->payload.resize(prefix);
      message->payload.insert(message->payload.end(), slice, slice + tensor.shard_bytes(shard));
    }
    if (!message->payload.empty()) {
      // The whole sequence, which the tag holds only modulo its width (ps_wire.h).
      const PsPayloadPrefix stamp{message->header.sequence, message->header.tensor};
      std::memcpy(message->payload.data(), &stamp, sizeof(stamp));
    }
    message->header.payload_bytes = message->payload.size();
    header_bytes += sizeof(PsRequestHeader);
    if (!message->payload.empty()) {
      header_bytes += prefix;
      value_bytes += message->payload.size() - prefix;
      uncompressed_bytes += tensor.shard_bytes(shard);
    }
    messages.push_back(std::move(message));
  }
  handle.server->submit(std::move(messages));
  tensor.traffic.sends += 1;
  tensor.traffic.send_bytes += value_bytes;
  tensor.traffic.send_uncompressed_bytes += uncompressed_bytes;
  tensor.traffic.header_bytes += header_bytes;
  return ncclSuccess;
}

ncclResult_t ps_receive(const PsHandle& handle, void* data, std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  const std::vector<size_t> shards = used_shards(tensor);
  *request = new_request(handle, shards.size(), false);
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : shards) {
    auto message = new_message(handle, shard, PsRequestKind::kReceive, *request);
    const ShardSpan& span = tensor.shards[shard];
    const size_t payload =
        tensor.receive_codec != nullptr
            ? tensor.receive_codec->max_encoded_bytes(span.count, tensor.codec_dtype)
            : tensor.shard_bytes(shard);
    message->reply.resize(sizeof(PsReplyHeader) + payload);
    message->destination = static_cast<uint8_t*>(data) + span.offset * tensor.element_bytes;
    messages.push_back(std::move(message));
  }
  // The answers' values are counted as they arrive (PsServer::take_answer).
  tensor.traffic.header_bytes += messages.size() * sizeof(PsRequestHeader);
  handle.server->submit(std::move(messages));
  tensor.traffic.receives += 1;
  return ncclSuccess;
}

ncclResult_t ps_clock(const PsHandle& handle, uint64_t clock, uint64_t staleness,
                      std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  // Held until the messages are submitted: two threads' clocks reach each owner in the order
  // they were checked here, so the later (larger) one is never refused as going back.
  std::lock_guard<std::mutex> lock(tensor.client_mutex);
  {
    if (clock < tensor.clock) {
      return fail(ncclInvalidArgument,
                  "tersePsClock: clock %llu is behind this rank's last clock %llu of tensor '%s' "
                  "(clocks never go back)",
                  (unsigned long long)clock, (unsigned long long)tensor.clock, tensor.name.c_str());
    }
    tensor.clock = clock;
  }
  // One message per owner (clocks are the owner's, not the shard's): to its first shard.
  std::vector<size_t> first_shard_of_owner;
  std::set<int> owners;
  for (size_t shard : used_shards(tensor)) {
    if (owners.insert(tensor.shards[shard].owner).second) first_shard_of_owner.push_back(shard);
  }
  *request = new_request(handle, first_shard_of_owner.size(), true);
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : first_shard_of_owner) {
    auto message = new_message(handle, shard, PsRequestKind::kClock, *request);
    message->header.clock = clock;
    message->header.staleness = staleness;
    messages.push_back(std::move(message));
  }
  tensor.traffic.header_bytes += messages.size() * sizeof(PsRequestHeader);
  handle.server->submit(std::move(messages));
  return ncclSuccess;
}

}  // namespace terse
