// What an owner checks before it serves a request: everything in a header or payload comes from
// another process, so nothing in it is trusted (a bug or a crafted message must be refused with
// a reason, never index a shard it does not name or copy bytes that did not arrive).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/ps_tensor.h"
#include "ps/ps_wire.h"

namespace terse {

// Whether rank `rank` may serve `header` with `tensor` (null: no such tensor here). On success
// `*payload_bytes` is the size of the payload message to receive (0: none follows). Otherwise
// `*refusal` and `*why` say how to refuse it; the client's payload (header.payload_bytes, if
// any) must still be drained. Checks the shard index and ownership, kind, rule, encoding and the
// payload's size for each.
bool validate_request(const PsRequestHeader& header, const PsTensor* tensor, int rank,
                      size_t* payload_bytes, ncclResult_t* refusal, std::string* why);

// Whether a payload of `received` bytes at `payload` (the message that arrived for `header`) is
// the one the header announced: its full size and a prefix naming the header's sequence and
// tensor (a payload from before the tag's sequence wrapped names another).
bool validate_payload(const PsRequestHeader& header, const uint8_t* payload, size_t received,
                      std::string* why);

}  // namespace terse
