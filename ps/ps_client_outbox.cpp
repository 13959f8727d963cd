// The client's side of the parameter server's thread: this rank's request messages sent to their
// owners, their answers taken (a receive's values written into the caller's tensor), and each one
// failed at its deadline or when its owner fails.
#include "ps/ps_server.h"

#include <cstdio>
#include <cstring>

#include "common/result.h"
#include "ps/ps_server_internal.h"

namespace terse {
namespace {

bool failed(TransferRequest& request) {
  if (!request.posted()) return false;
  const ucs_status_t status = request.status();
  return status != UCS_INPROGRESS && status != UCS_OK;
}

// The results an owner may send; anything else from the wire is a remote failure.
bool known_result(int32_t result) {
  return result >= int32_t(ncclSuccess) && result <= int32_t(ncclRemoteError);
}

}  // namespace

void PsServer::submit(std::vector<std::unique_ptr<PsClientMessage>> messages) {
  {
    std::lock_guard<std::mutex> lock(submissions_mutex_);
    for (auto& message : messages) submissions_.push_back(std::move(message));
  }
  wake();
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

std::string PsServer::describe(const PsClientMessage& message) const {
  static const char* const kinds[] = {"?", "send", "receive", "clock"};
  const unsigned kind = message.header.kind <= 3 ? message.header.kind : 0;
  return "rank " + std::to_string(rank_) + ": tersePs " + kinds[kind] + " of tensor '" +
         message.tensor->name + "' (shard " + std::to_string(message.header.shard) +
         ", owner rank " + std::to_string(message.owner) + ")";
}

}  // namespace terse
