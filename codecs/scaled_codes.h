// The payload shared by the low-bit quantizers (sign, terngrad, qsgd): one fp32 scale per block
// of elements, then one small code per element.
//
// Payload, after the 32-byte header:
//   scales: ceil(count / block) fp32 values, little-endian, scale b for elements
//           [b * block, min((b + 1) * block, count));
//   codes:  count codes of Math::kBits each, packed as bit_packing.h describes
//           (ceil(count * kBits / 8) bytes, unused bits of the last byte zero).
// `block` is a multiple of 8 so that every 8-element chunk of the packing lies in one block.
//
// A quantizer is a policy struct `Math` (sign_math.h, qsgd_math.h, terngrad_math.h) with:
//   kBits, kStochastic, kStats (which BlockStats it needs), a Coder (per-block constants),
//   scale(stats, n) -> the block's wire scale, coder(scale), encode(coder, x, uniform) -> code,
//   decode(coder, code) -> value, checks_codes() and byte_valid(byte) for decode validation.
// Encoder and decoder both derive the Coder from the scale as stored, so the encoder's error
// output (x - decode(code)) is exactly what a decode gives. scaled_codes_cpu.h drives the policy
// on the CPU, cuda/scaled_codes_kernels.cuh drives the same policy on the GPU.
#pragma once

#include <nccl.h>

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "codecs/bit_packing.h"
#include "common/host_device.h"

namespace terse {

constexpr uint32_t kScaledCodesMinBlock = 8;
constexpr uint32_t kScaledCodesMaxBlock = 65536;

struct ScaledCodesLayout {
  size_t blocks = 0;
  size_t scale_bytes = 0;
  size_t code_bytes = 0;
  size_t payload_bytes = 0;
};

// The payload layout of `count` elements; false when the sizes would overflow size_t.
inline bool scaled_codes_layout(size_t count, uint32_t block, int bits, ScaledCodesLayout* layout) {
  if (block == 0 || count > (SIZE_MAX - 1024) / 16) return false;
  layout->blocks = count / block + (count % block != 0 ? 1 : 0);
  layout->scale_bytes = layout->blocks * sizeof(float);
  layout->code_bytes = packed_code_bytes(count, bits);
  layout->payload_bytes = layout->scale_bytes + layout->code_bytes;
  return true;
}

// A scale a valid message can hold: finite and not negative (NaN fails both tests).
TERSE_HD bool scale_is_valid(float scale) {
  return scale >= 0.0f && scale <= FLT_MAX;
}

// The block holding element `i`. 32-bit division where the index allows: a 64-bit division is a
// long subroutine on the GPU, and this runs per element there.
TERSE_HD size_t block_of(size_t i, uint32_t block) {
  return i <= 0xffffffffu ? size_t(uint32_t(i) / block) : i / block;
}

// Why a payload is invalid, for the error message.
struct ScaledCodesDefect {
  enum Kind { kNone, kScale, kCode, kPadding } kind = kNone;
  size_t index = 0;  // block of the bad scale, or byte of the bad code
  float scale = 0.0f;
};

// Refuses a block size outside [kScaledCodesMinBlock, kScaledCodesMaxBlock] or not a multiple
// of 8, naming `codec`; `where` says whether it came from parameters or a message.
ncclResult_t check_scaled_codes_block(const char* codec, const char* where, long long block);

// A decode's checks once its header is read: the layout of `count` elements in blocks of
// `block` at `bits` per code (too large a count is refused), a message of exactly the header and
// that payload, and an output to write when count > 0. Errors name `codec`.
ncclResult_t check_scaled_codes_message(const char* codec, size_t count, uint32_t block, int bits,
                                        size_t message_bytes, const void* output,
                                        ScaledCodesLayout* layout);

// Refuses a device message that is not 4-byte aligned (the kernels access fp32 scales and
// 32-bit code words in place).
ncclResult_t check_scaled_codes_alignment(const char* codec, const void* message);

// The error for an invalid payload (ncclInvalidArgument), naming `codec` and the defect.
ncclResult_t scaled_codes_defect_error(const char* codec, const ScaledCodesDefect& defect);

}  // namespace terse
