#include "codecs/scaled_codes.h"

#include <cstdint>

#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse {

ncclResult_t check_scaled_codes_message(const char* codec, size_t count, uint32_t block, int bits,
                                        size_t message_bytes, const void* output,
                                        ScaledCodesLayout* layout) {
  if (!scaled_codes_layout(count, block, bits, layout)) {
    return fail(ncclInvalidArgument, "%s: count %zu is too large", codec, count);
  }
  TERSE_CHECK(check_payload(codec, kWireHeaderBytes + layout->payload_bytes, message_bytes));
  if (count > 0 && output == nullptr) return fail(ncclInvalidArgument, "%s: output is null", codec);
  return ncclSuccess;
}

ncclResult_t check_scaled_codes_block(const char* codec, const char* where, long long block) {
  if (block < kScaledCodesMinBlock || block > kScaledCodesMaxBlock) {
    return fail(ncclInvalidArgument, "%s: %s block=%lld is outside [%u, %u]", codec, where, block,
                kScaledCodesMinBlock, kScaledCodesMaxBlock);
  }
  if (block % 8 != 0) {
    // The packing puts 8 consecutive elements in one chunk, which must share one scale.
    return fail(ncclInvalidArgument, "%s: %s block=%lld is not a multiple of 8", codec, where,
                block);
  }
  return ncclSuccess;
}

ncclResult_t check_scaled_codes_alignment(const char* codec, const void* message) {
  if (reinterpret_cast<uintptr_t>(message) % 4 != 0) {
    return fail(ncclInvalidArgument, "%s: device message %p is not 4-byte aligned", codec, message);
  }
  return ncclSuccess;
}

ncclResult_t scaled_codes_defect_error(const char* codec, const ScaledCodesDefect& defect) {
  switch (defect.kind) {
    case ScaledCodesDefect::kScale:
      return fail(ncclInvalidArgument,
                  "%s: message scale of block %zu is %g (must be finite and not negative)", codec,
                  defect.index, static_cast<double>(defect.scale));
    case ScaledCodesDefect::kCode:
      return fail(ncclInvalidArgument,
                  "%s: message code byte %zu holds a level above the header's level count", codec,
                  defect.index);
    case ScaledCodesDefect::kPadding:
      return fail(ncclInvalidArgument, "%s: message padding bits of code byte %zu are not zero",
                  codec, defect.index);
    case ScaledCodesDefect::kNone:
      break;
  }
  return ncclSuccess;
}

}  // namespace terse
