#include "ps/ps_validation.h"

#include <cstring>

namespace terse {
namespace {

bool refuse(ncclResult_t result, std::string text, ncclResult_t* refusal, std::string* why) {
  *refusal = result;
  *why = std::move(text);
  return false;
}

}  // namespace

bool validate_request(const PsRequestHeader& header, const PsTensor* tensor, int rank,
                      size_t* payload_bytes, ncclResult_t* refusal, std::string* why) {
  *payload_bytes = 0;
  if (tensor == nullptr) {
    return refuse(ncclInvalidUsage,
                  "tensor " + std::to_string(header.tensor) +
                      " is not (or no longer) initialised on rank " + std::to_string(rank) +
                      " (was it freed?)",
                  refusal, why);
  }
  if (header.shard >= tensor->shards.size() || tensor->shards[header.shard].owner != rank ||
      header.shard >= tensor->storage.size() ||
      tensor->storage[header.shard].size() != tensor->shard_bytes(header.shard)) {
    return refuse(ncclInvalidUsage,
                  "shard " + std::to_string(header.shard) + " of tensor '" + tensor->name +
                      "' is not owned by rank " + std::to_string(rank),
                  refusal, why);
  }
  const uint64_t prefix = sizeof(PsPayloadPrefix);
  const uint64_t shard_bytes = tensor->shard_bytes(header.shard);
  switch (PsRequestKind(header.kind)) {
    case PsRequestKind::kReceive:
    case PsRequestKind::kClock:
      if (header.payload_bytes != 0) {
        return refuse(ncclInvalidUsage, "a receive or clock request with a payload", refusal, why);
      }
      return true;
    case PsRequestKind::kSend:
      break;
    default:
      return refuse(ncclInvalidArgument, "unknown request kind " + std::to_string(header.kind),
                    refusal, why);
  }
  if (header.rule > 2) {
    return refuse(ncclInvalidArgument, "unknown update rule " + std::to_string(header.rule),
                  refusal, why);
  }
  if (header.encoding != uint8_t(PsEncoding::kRaw) &&
      header.encoding != uint8_t(PsEncoding::kCodec)) {
    return refuse(ncclInvalidArgument,
                  "unknown payload encoding " + std::to_string(header.encoding), refusal, why);
  }
  if (header.rule == 0 /* zero */) {
    if (header.payload_bytes != 0 || header.encoding != uint8_t(PsEncoding::kRaw)) {
      return refuse(ncclInvalidUsage, "a zero request with a payload", refusal, why);
    }
    return true;
  }
  if (header.encoding == uint8_t(PsEncoding::kCodec)) {
    if (tensor->push_decoder == nullptr || header.rule != 2 /* add */) {
      return refuse(ncclInvalidUsage,
                    "a compressed payload for a tensor or rule without a push codec", refusal, why);
    }
    const uint64_t limit = tensor->push_decoder->max_encoded_bytes(
        tensor->shards[header.shard].count, tensor->codec_dtype);
    if (header.payload_bytes < prefix || header.payload_bytes - prefix > limit) {
      return refuse(ncclInvalidUsage,
                    "a compressed payload of " + std::to_string(header.payload_bytes) +
                        " bytes, outside the codec's bound of " + std::to_string(limit) +
                        " (plus a prefix of " + std::to_string(prefix) + ")",
                    refusal, why);
    }
    *payload_bytes = size_t(header.payload_bytes);
    return true;
  }
  if (header.payload_bytes != prefix + shard_bytes) {
    return refuse(ncclInvalidUsage,
                  "a payload of " + std::to_string(header.payload_bytes) +
                      " bytes for a shard of " + std::to_string(shard_bytes) +
                      " (plus a prefix of " + std::to_string(prefix) + ")",
                  refusal, why);
  }
  *payload_bytes = size_t(header.payload_bytes);
  return true;
}

bool validate_payload(const PsRequestHeader& header, const uint8_t* payload, size_t received,
                      std::string* why) {
  if (received != header.payload_bytes || received < sizeof(PsPayloadPrefix)) {
    *why = "a payload of " + std::to_string(received) + " bytes where the header announced " +
           std::to_string(header.payload_bytes);
    return false;
  }
  PsPayloadPrefix prefix;
  std::memcpy(&prefix, payload, sizeof(prefix));
  if (prefix.sequence != header.sequence || prefix.tensor != header.tensor) {
    *why = "a stale payload (sequence " + std::to_string(prefix.sequence) + " of tensor " +
           std::to_string(prefix.tensor) + ", expected sequence " +
           std::to_string(header.sequence) + " of tensor " + std::to_string(header.tensor) + ")";
    return false;
  }
  return true;
}

}  // namespace terse
