// The update rules an owner applies to a shard (terse.h: tersePsRule_t), on the element types
// the parameter server takes: fp32 and fp64 added in their own precision, fp16 and bf16 added
// in fp32 and rounded once to the type (as a reduction of that type rounds each sum).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "codecs/dtype.h"
#include "ps/ps_wire.h"

namespace terse {

class Codec;

// Whether the parameter server holds tensors of `type`.
bool ps_type_supported(ncclDataType_t type);

// shard[i] += values[i] for `count` elements of `type`.
void add_into_shard(void* shard, const void* values, size_t count, ncclDataType_t type);

// A validated push (ps_validation.h) applied to a shard of `shard_bytes` bytes, `count` elements
// of `type`: rule 0 zeroes it, 1 copies `values` over it, 2 adds them (with `encoding` kCodec,
// `value_bytes` of a message `decoder` decodes in `codec_dtype`). Touches nothing but `shard`;
// ncclInvalidArgument with `*why` when the message does not decode, the shard then untouched.
ncclResult_t apply_push(uint8_t rule, PsEncoding encoding, const uint8_t* values,
                        size_t value_bytes, const Codec* decoder, DType codec_dtype,
                        ncclDataType_t type, size_t count, uint8_t* shard, size_t shard_bytes,
                        std::string* why);

}  // namespace terse
