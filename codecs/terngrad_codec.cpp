// The `terngrad` codec: TernGrad's stochastic ternary quantization (Wen et al. 2017) with one
// scale per block of elements. The math and its bounds are in terngrad_math.h.
//
// Parameters: block=256 (8..65536, a multiple of 8), clip=0 (0..100: 0 off, else the paper's
//   gradient clipping at clip * sigma of the block; the paper uses 2.5).
// Message: header {codec 7, dtype, count, param0 = block, param1 = 0, flags = 0, seed = the
//   encode seed (informational)}, then
//   scales: ceil(count / block) fp32, the scale S of each block (max |x|, or min(max |x|,
//           clip * RMS) with clipping; the RMS is summed in the fixed order of block_stats.h);
//   codes:  one 2-bit sign-magnitude code per element (bit 0: |b|, bit 1: b < 0), packed as
//           bit_packing.h describes (ceil(count / 4) bytes; unused bits of the last byte zero).
// Size: 32 + 4 ceil(count / block) + ceil(count / 4) bytes; 0.0664 of fp32 input at block=256.
// Bounds (per element, clip=0): E[x^] = x; Var[x^] = S |x| - x^2 <= S |x|; x^ in {0, S sign(x)}.
#include <cstdio>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/scaled_codes.h"
#include "codecs/scaled_codes_cpu.h"
#include "codecs/terngrad_math.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/terngrad_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "terngrad";
constexpr double kMaxClip = 100.0;

class TernGradCodec final : public Codec {
 public:
  TernGradCodec(uint32_t block, float clip) : block_(block), clip_(clip) {}

  CodecId id() const override { return CodecId::kTernGrad; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  bool stable_under_error_feedback() const override { return false; }
  bool unbiased() const override { return clip_ == 0.0f; }  // clipping trades bias for variance
  std::string spec() const override {
    // %.9g round-trips an fp32 value, so the spec rebuilds the same codec.
    char clip[32];
    snprintf(clip, sizeof(clip), "%.9g", static_cast<double>(clip_));
    return "terngrad:block=" + std::to_string(block_) + ",clip=" + clip;
  }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, TernGradMath::kBits, &layout)) return SIZE_MAX;
    return kWireHeaderBytes + layout.payload_bytes;
  }

  // Not linear: each rank's blocks have their own scale. The size depends on the count alone.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // x^ in {0, S sign x} with S <= max|x|, so x moves by at most max|x|; clipping (S below the
  // block's max) moves it by at most another max|x|.
  ErrorBound error_bound(size_t) const override {
    return ErrorBound::stated_as(clip_ > 0.0f ? 2.0 : 1.0);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) {
      return fail(ncclInvalidArgument, "terngrad: input is null");
    }
    if (message == nullptr) return fail(ncclInvalidArgument, "terngrad: message is null");
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, TernGradMath::kBits, &layout)) {
      return fail(ncclInvalidArgument, "terngrad: count %zu is too large", count);
    }
    const size_t bytes = kWireHeaderBytes + layout.payload_bytes;
    TERSE_CHECK(check_capacity(kName, bytes, capacity));
    WireHeader header = make_header(CodecId::kTernGrad, dtype, count);
    header.param0 = block_;
    header.seed = context.seed;
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
      TERSE_CHECK(check_scaled_codes_alignment(kName, message));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(launch_terngrad_encode(block_, clip_, dtype, input, count, context.seed, payload,
                                         context.error, context.stream));
#endif
    } else {
      write_header(message, header);
      scaled_codes_encode_host(TernGradMath{clip_}, dtype, input, count, block_, context.seed,
                               payload, payload + layout.scale_bytes, context.error);
    }
    *message_bytes = bytes;
    return ncclSuccess;
  }

  // Decodes whatever block the message carries (it describes itself).
  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, CodecId::kTernGrad, count, context, &header));
    TERSE_CHECK(check_scaled_codes_block(kName, "message", header.param0));
    if (header.param1 != 0 || header.flags != 0) {
      return fail(ncclInvalidArgument, "terngrad: message param1=%u flags=%u, both must be 0",
                  header.param1, header.flags);
    }
    const uint32_t block = header.param0;
    ScaledCodesLayout layout;
    TERSE_CHECK(check_scaled_codes_message(kName, count, block, TernGradMath::kBits, message_bytes,
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
            TernGradMath{0.0f}, host, layout.blocks, host + layout.scale_bytes, count);
        if (defect.kind != ScaledCodesDefect::kNone)
          return scaled_codes_defect_error(kName, defect);
        valid = true;
      } else {
        TERSE_CHECK(launch_terngrad_validate(block, payload, count, context.stream, &valid));
      }
      if (!valid) {
        return fail(ncclInvalidArgument,
                    "terngrad: message holds a NaN, infinite or negative scale, or nonzero "
                    "padding");
      }
      return launch_terngrad_decode(block, payload, count, dtype, output, accumulate,
                                    context.stream);
#endif
    }
    const TernGradMath math{0.0f};  // clipping only matters when encoding
    const ScaledCodesDefect defect = scaled_codes_validate_cpu(math, payload, layout.blocks,
                                                               payload + layout.scale_bytes, count);
    if (defect.kind != ScaledCodesDefect::kNone) return scaled_codes_defect_error(kName, defect);
    scaled_codes_decode_host(math, payload, payload + layout.scale_bytes, count, block, dtype,
                             output, accumulate);
    return ncclSuccess;
  }

 private:
  uint32_t block_;
  float clip_;
};

}  // namespace

ncclResult_t create_terngrad_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  long long block = 0;
  double clip = 0;
  TERSE_CHECK(params.get_int("block", 256, kScaledCodesMinBlock, kScaledCodesMaxBlock, &block));
  TERSE_CHECK(check_scaled_codes_block(kName, "parameter", block));
  TERSE_CHECK(params.get_double("clip", 0.0, 0.0, kMaxClip, &clip));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<TernGradCodec>(static_cast<uint32_t>(block), static_cast<float>(clip));
  return ncclSuccess;
}

}  // namespace terse
