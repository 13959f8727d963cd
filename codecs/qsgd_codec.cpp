// The `qsgd` codec: QSGD's stochastic, unbiased quantization to s levels per sign (Alistarh et al.
// 2017), with one norm per block of elements. The math and its bounds are in qsgd_math.h.
//
// Parameters: levels=7 (1..127: s), block=256 (8..65536, a multiple of 8), norm=max|l2.
//   The max norm (default) gives finer levels than the paper's L2 norm for the same bits;
//   l2 reproduces the paper's scheme and its variance bound.
// Message: header {codec 6, dtype, count, param0 = block, param1 = levels, flags = norm (0 max,
//   1 l2; informational), seed = the encode seed (informational)}, then
//   scales: ceil(count / block) fp32, the norm N of each block (max |x|, or sqrt of the sum of
//           squares in the fixed order of block_stats.h, so CPU and GPU agree bit for bit);
//   codes:  one sign-magnitude code per element of b bits, b = 2 for s = 1, 4 for s <= 7,
//           8 for s <= 127 (level in the low b - 1 bits, sign on top), packed as bit_packing.h
//           describes (ceil(count * b / 8) bytes; unused bits of the last byte zero).
// Size: 32 + 4 ceil(count / block) + ceil(count * b / 8) bytes; 0.1289 of fp32 input at the
// defaults (b = 4, block 256).
// Bounds (per element, any norm): E[x^] = x; Var[x^] <= (N / s)^2 / 4 (rounding between two
// levels N / s apart); |x^| <= N; x^ lies on one of the two levels next to x. With norm=l2, per
// block of d elements E||x^ - x||^2 <= min(d / s^2, sqrt(d) / s) ||x||^2 (the paper's Lemma 3.1).
#include <cmath>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/qsgd_math.h"
#include "codecs/scaled_codes.h"
#include "codecs/scaled_codes_cpu.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/qsgd_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "qsgd";
constexpr long long kMaxLevels = 127;

class QsgdCodec final : public Codec {
 public:
  QsgdCodec(uint32_t block, uint32_t levels, QsgdNorm norm)
      : block_(block), levels_(levels), norm_(norm) {}

  CodecId id() const override { return CodecId::kQsgd; }
  bool unbiased() const override { return true; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  std::string spec() const override {
    return "qsgd:block=" + std::to_string(block_) + ",levels=" + std::to_string(levels_) +
           ",norm=" + (norm_ == QsgdNorm::kL2 ? "l2" : "max");
  }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, qsgd_code_bits(levels_), &layout)) return SIZE_MAX;
    return kWireHeaderBytes + layout.payload_bytes;
  }

  // Not linear: each rank's blocks have their own norm. The size depends on the count alone.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // x^ lies on one of the two levels next to x, N / levels apart, N the block's norm (at most
  // the tensor's max |x|, or its L2 norm with norm=l2); 2^-20 N covers fp32 rounding.
  ErrorBound error_bound(size_t) const override {
    ErrorBound bound;
    bound.stated = true;
    bound.factor = 1.0 / levels_ + std::ldexp(1.0, -20);
    bound.norm = norm_ == QsgdNorm::kL2 ? BoundNorm::kL2 : BoundNorm::kMaxAbs;
    return bound;
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "qsgd: input is null");
    if (message == nullptr) return fail(ncclInvalidArgument, "qsgd: message is null");
    ScaledCodesLayout layout;
    if (!scaled_codes_layout(count, block_, qsgd_code_bits(levels_), &layout)) {
      return fail(ncclInvalidArgument, "qsgd: count %zu is too large", count);
    }
    const size_t bytes = kWireHeaderBytes + layout.payload_bytes;
    TERSE_CHECK(check_capacity(kName, bytes, capacity));
    WireHeader header = make_header(CodecId::kQsgd, dtype, count);
    header.param0 = block_;
    header.param1 = levels_;
    header.flags = static_cast<uint8_t>(norm_);
    header.seed = context.seed;
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
      TERSE_CHECK(check_scaled_codes_alignment(kName, message));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(launch_qsgd_encode(block_, levels_, norm_, dtype, input, count, context.seed,
                                     payload, context.error, context.stream));
#endif
    } else {
      write_header(message, header);
      dispatch_qsgd(levels_, norm_, [&](auto math) {
        scaled_codes_encode_host(math, dtype, input, count, block_, context.seed, payload,
                                 payload + layout.scale_bytes, context.error);
      });
    }
    *message_bytes = bytes;
    return ncclSuccess;
  }

  // Decodes whatever block, levels and norm the message carries (it describes itself).
  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, CodecId::kQsgd, count, context, &header));
    TERSE_CHECK(check_scaled_codes_block(kName, "message", header.param0));
    if (header.param1 < 1 || header.param1 > kMaxLevels) {
      return fail(ncclInvalidArgument, "qsgd: message levels=%u is outside [1, %lld]",
                  header.param1, kMaxLevels);
    }
    if (header.flags > static_cast<uint8_t>(QsgdNorm::kL2)) {
      return fail(ncclInvalidArgument, "qsgd: message norm flag %u is not 0 (max) or 1 (l2)",
                  header.flags);
    }
    const uint32_t block = header.param0;
    const uint32_t levels = header.param1;
    ScaledCodesLayout layout;
    TERSE_CHECK(check_scaled_codes_message(kName, count, block, qsgd_code_bits(levels),
                                           message_bytes, output, &layout));
    const uint8_t* payload = static_cast<const uint8_t*>(message) + kWireHeaderBytes;
    const QsgdNorm norm = static_cast<QsgdNorm>(header.flags);
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
      TERSE_CHECK(check_scaled_codes_alignment(kName, message));
#if TERSE_HAVE_CUDA
      if (context.host_message != nullptr) {
        const uint8_t* host = static_cast<const uint8_t*>(context.host_message) + kWireHeaderBytes;
        TERSE_CHECK(dispatch_qsgd(levels, norm, [&](auto math) {
          const ScaledCodesDefect defect = scaled_codes_validate_cpu(
              math, host, layout.blocks, host + layout.scale_bytes, count);
          return defect.kind != ScaledCodesDefect::kNone ? scaled_codes_defect_error(kName, defect)
                                                         : ncclSuccess;
        }));
        return launch_qsgd_decode(block, levels, payload, count, dtype, output, accumulate,
                                  context.stream);
      }
      bool valid = false;
      TERSE_CHECK(launch_qsgd_validate(block, levels, payload, count, context.stream, &valid));
      if (!valid) {
        return fail(ncclInvalidArgument,
                    "qsgd: message holds a NaN, infinite or negative norm, a level above "
                    "levels=%u, or nonzero padding",
                    levels);
      }
      return launch_qsgd_decode(block, levels, payload, count, dtype, output, accumulate,
                                context.stream);
#endif
    }
    return dispatch_qsgd(levels, norm, [&](auto math) {
      const ScaledCodesDefect defect = scaled_codes_validate_cpu(
          math, payload, layout.blocks, payload + layout.scale_bytes, count);
      if (defect.kind != ScaledCodesDefect::kNone) return scaled_codes_defect_error(kName, defect);
      scaled_codes_decode_host(math, payload, payload + layout.scale_bytes, count, block, dtype,
                               output, accumulate);
      return ncclSuccess;
    });
  }

 private:
  uint32_t block_;
  uint32_t levels_;
  QsgdNorm norm_;
};

}  // namespace

ncclResult_t create_qsgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  long long levels = 0, block = 0;
  std::string norm;
  TERSE_CHECK(params.get_int("levels", 7, 1, kMaxLevels, &levels));
  TERSE_CHECK(params.get_int("block", 256, kScaledCodesMinBlock, kScaledCodesMaxBlock, &block));
  TERSE_CHECK(check_scaled_codes_block(kName, "parameter", block));
  TERSE_CHECK(params.get_choice("norm", {"max", "l2"}, "max", &norm));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<QsgdCodec>(static_cast<uint32_t>(block), static_cast<uint32_t>(levels),
                                       norm == "l2" ? QsgdNorm::kL2 : QsgdNorm::kMax);
  return ncclSuccess;
}

}  // namespace terse
