// The `sign` codec: one bit per element and one fp32 scale per block, the scaled sign of
// EF-signSGD (Karimireddy et al. 2019) and 1-bit Adam; deterministic. Meant to run with error
// feedback (EncodeContext.error, residual memory), which makes its bias harmless over steps.
//
// Parameters: block=256 (8..65536, a multiple of 8).
// Message: header {codec 8, dtype, count, param0 = block, param1 = 0, flags = 0, seed = 0}, then
//   scales: ceil(count / block) fp32, the mean |x| of each block (summed in the fixed order of
//           block_stats.h, so CPU and GPU agree bit for bit);
//   codes:  one bit per element, 1 for x < 0, packed as bit_packing.h describes
//           (ceil(count / 8) bytes; unused bits of the last byte zero).
// Size: 32 + 4 ceil(count / block) + ceil(count / 8) bytes, 0.0352 of fp32 input at block=256.
// Decoded: x^ = -scale for a 1 bit, +scale for a 0 bit (x = +-0 decodes to +scale).
// Error: per element |x - x^| = | |x| - scale | when the sign is kept; per block
// ||x - x^||^2 = ||x||^2 - ||x||_1^2 / n (the mean is the least-squares scale for fixed signs).
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/scaled_codes.h"
#include "codecs/scaled_codes_cpu.h"
#include "codecs/sign_math.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/sign_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "sign";

class SignCodec final : public Codec {
 public:
  explicit SignCodec(uint32_t block) : block_(block) {}

  CodecId id() const override { return CodecId::kSign; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  std::string spec() const override { return "sign:block=" + std::to_string(block_); }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, SignMath::kBits, &layout)) return SIZE_MAX;
    return kWireHeaderBytes + layout.payload_bytes;
  }

  // Not linear: each rank's blocks have their own scale. The size depends on the count alone.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // | |x| - mean|x| | <= max|x| per element (a sign kept; +-0 decodes to +mean|x|).
  ErrorBound error_bound(size_t) const override { return ErrorBound::stated_as(1.0); }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "sign: input is null");
    if (message == nullptr) return fail(ncclInvalidArgument, "sign: message is null");
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, SignMath::kBits, &layout)) {
      return fail(ncclInvalidArgument, "sign: count %zu is too large", count);
    }
    const size_t bytes = kWireHeaderBytes + layout.payload_bytes;
    TERSE_CHECK(check_capacity(kName, bytes, capacity));
    WireHeader header = make_header(CodecId::kSign, dtype, count);
    header.param0 = block_;
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
      TERSE_CHECK(check_scaled_codes_alignment(kName, message));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(
          launch_sign_encode(block_, dtype, input, count, payload, context.error, context.stream));
#endif
    } else {
      write_header(message, header);
      scaled_codes_encode_host(SignMath{}, dtype, input, count, block_, 0, payload,
                               payload + layout.scale_bytes, context.error);
    }
    *message_bytes = bytes;
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, CodecId::kSign, count, context, &header));
    TERSE_CHECK(check_scaled_codes_block(kName, "message", header.param0));
    if (header.param1 != 0 || header.flags != 0) {
      return fail(ncclInvalidArgument, "sign: message param1=%u flags=%u, both must be 0",
                  header.param1, header.flags);
    }
    const uint32_t block = header.param0;
    ScaledCodesLayout layout;
    TERSE_CHECK(check_scaled_codes_message(kName, count, block, SignMath::kBits, message_bytes,
                                           output, &layout));
    const uint8_t* payload = static_cast<const uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
      TERSE_CHECK(check_scaled_codes_alignment(kName, message));
#if TERSE_HAVE_CUDA
      bool valid = false;
      if (context.host_message != nullptr) {
        const uint8_t* host = static_cast<const uint8_t*>(context.host_message) + kWireHeaderBytes;
        const ScaledCodesDefect defect = scaled_codes_validate_cpu(
            SignMath{}, host, layout.blocks, host + layout.scale_bytes, count);
        if (defect.kind != ScaledCodesDefect::kNone)
          return scaled_codes_defect_error(kName, defect);
        valid = true;
      } else {
        TERSE_CHECK(launch_sign_validate(block, payload, count, context.stream, &valid));
      }
      if (!valid) {
        return fail(ncclInvalidArgument,
                    "sign: message holds a NaN, infinite or negative scale, or nonzero padding");
      }
      return launch_sign_decode(block, payload, count, dtype, output, accumulate, context.stream);
#endif
    }
    const ScaledCodesDefect defect = scaled_codes_validate_cpu(SignMath{}, payload, layout.blocks,
                                                               payload + layout.scale_bytes, count);
    if (defect.kind != ScaledCodesDefect::kNone) return scaled_codes_defect_error(kName, defect);
    scaled_codes_decode_host(SignMath{}, payload, payload + layout.scale_bytes, count, block, dtype,
                             output, accumulate);
    return ncclSuccess;
  }

 private:
  uint32_t block_;
};

}  // namespace

ncclResult_t create_sign_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  long long block = 0;
  TERSE_CHECK(params.get_int("block", 256, kScaledCodesMinBlock, kScaledCodesMaxBlock, &block));
  TERSE_CHECK(check_scaled_codes_block(kName, "parameter", block));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<SignCodec>(static_cast<uint32_t>(block));
  return ncclSuccess;
}

}  // namespace terse
