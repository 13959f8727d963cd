// The block-scaled low-precision codecs: mxfp8 and mxfp4 (OCP Microscaling Formats v1.0) and
// nvfp4 (NVIDIA's FP4 with a two-level scale). Element formats and their rounding: minifloat.h;
// scale derivations: block_scaled_math.h.
//
//   mxfp8  E4M3 elements (elem=e4m3, default) or E5M2 (elem=e5m2), one E8M0 scale per 32;
//   mxfp4  E2M1 elements, one E8M0 scale per 32;
//   nvfp4  E2M1 elements, one E4M3 scale per 16, one fp32 scale per message (tensor).
// MX: a block's scale is 2^e, e = floor(log2 max|x|) - emax_elem (8 E4M3, 15 E5M2, 2 E2M1),
// clamped to E8M0's [-127, 127]; elements are x / 2^e converted to the element format,
// saturating at its max normal. NVFP4: see block_scaled_math.h.
// Parameters: rounding=nearest|stochastic (default nearest; stochastic draws rounding_uniform
// of (seed, element index), so a result depends only on EncodeContext::seed and the data, and is
// unbiased for every element below the max normal), and for mxfp8 elem=e4m3|e5m2.
//
// Wire payload after the 32-byte header (header.param0 = the block, 32 or 16; header.param1 = 0,
// or nvfp4's fp32 tensor scale as its bits; header.flags = kBlockScaledE5M2Flag (mxfp8 with
// E5M2) | kBlockScaledStochasticFlag (informational); header.seed = the stochastic rounding seed,
// else 0):
//   uint8 scale[blocks]    blocks = ceil(count / block): E8M0 (MX) or E4M3 (nvfp4) codes
//   codes                  mxfp8: one byte per element; mxfp4, nvfp4: two E2M1 codes per byte,
//                          element 2j in the low nibble of byte j (an odd count's last high
//                          nibble zero)
// On fp32 input: mxfp8 (1 + 1/32) / 4 = 0.258 of the input, mxfp4 0.133, nvfp4 0.141, plus the
// header.
//
// Stated error bounds, per element x of a block with M = max |x| over the block (B the factor):
// the MX scale puts M / 2^e in the top binade [2^emax, 2^(emax + 1)), so an element that
// saturates (x / 2^e above the max normal) loses (y - max normal) / y < 1 - max normal /
// 2^(emax + 1) of itself, and one that does not loses at most half (nearest) or all (stochastic)
// of a top-binade quantum, against M >= 2^emax:
//   mxfp8 E4M3  1/8 both roundings (saturation 64/512; quanta 32 of [256, 512): 1/16, 1/8);
//   mxfp8 E5M2  nearest 1/8 (saturation 8192/65536), stochastic 1/4 (a 2^13 quantum over 2^15);
//   mxfp4       nearest 1/4 (saturation 2/8; half a quantum 2 over 4), stochastic 1/2.
//   nvfp4       nearest (1 + 2^-4) / 6 + 2^-20, stochastic twice that: the E4M3 block scale is
//               within 2^-4 of M / 6 relative, so M is at least 6 / (1 + 2^-4) quanta-units D and
//               an element loses at most half (nearest) or all of a 2D quantum; saturation loses
//               less. Blocks whose scale is an E4M3 subnormal or zero (M below 2^-14.8 of the
//               tensor's max) lose under 2^-15 of the tensor's max, within the same bound in
//               tensor terms (which is what ErrorBound states).
// MX codecs convert exactly (power-of-two scaling), so blocks only lose to their own tiny
// absolute term when the scale clamps at 2^-127 (under 2^-128); nvfp4 tensors whose max |x| is
// below 2^-114 (an fp32-subnormal tensor scale) may lose up to it.
//
// Non-finite input (only seen on device, or by a direct call: Codec::encode escapes it): a block
// holding NaN or +-Inf gets scale 0xFF (E8M0 NaN; for nvfp4 the tensor scale is NaN instead),
// zero codes and a NaN error output; a host encode fails naming the block, and every decoder
// refuses such a message. Decoders refuse E8M0 scales above 2^(127 - emax_elem) (no encoder
// writes them, and they could decode beyond fp32), E4M3 block scales that are negative or NaN,
// element codes that are NaN or infinity (E4M3 S.1111.111, E5M2 exponent 11111), nonzero
// padding, and nvfp4 tensor scales that are negative, non-finite or too large for 6 * 448 of
// them to be finite: an accepted message decodes finite.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "codecs/block_scaled_cpu.h"
#include "codecs/block_scaled_math.h"
#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/block_scaled_kernels.h"
#endif

namespace terse {
namespace {

// Calls fn(E4M3{}), fn(E5M2{}) or fn(E2M1{}) for a codec's element format.
template <typename Fn>
auto dispatch_element(BlockScaledKind kind, bool e5m2, Fn&& fn) {
  if (kind != BlockScaledKind::kMxfp8) return fn(E2M1{});
  return e5m2 ? fn(E5M2{}) : fn(E4M3{});
}

template <typename Fn>
auto dispatch_rounding(bool stochastic, Fn&& fn) {
  return stochastic ? fn(std::true_type{}) : fn(std::false_type{});
}

const char* kind_name(BlockScaledKind kind) {
  switch (kind) {
    case BlockScaledKind::kMxfp8:
      return "mxfp8";
    case BlockScaledKind::kMxfp4:
      return "mxfp4";
    case BlockScaledKind::kNvfp4:
      break;
  }
  return "nvfp4";
}

// Refuses the first scale, element code or padding nibble that no encoder writes for finite
// input (see the top of the file).
template <typename F>
ncclResult_t validate_payload(const char* name, BlockScaledKind kind, const uint8_t* payload,
                              size_t count, float tensor_scale) {
  const uint32_t block = kind == BlockScaledKind::kNvfp4 ? kNvBlock : kMxBlock;
  const BlockScaledLayout layout = block_scaled_layout(count, block, F::kBits);
  if (kind == BlockScaledKind::kNvfp4 && !nv_tensor_scale_is_valid(tensor_scale)) {
    return fail(ncclInvalidArgument,
                "%s: message tensor scale %g is negative, not finite or too large", name,
                static_cast<double>(tensor_scale));
  }
  const bool nv = kind == BlockScaledKind::kNvfp4;
  const size_t bad_scale =
      nv ? block_scaled_bad_scale<true>(payload, layout.blocks, 0)
         : block_scaled_bad_scale<false>(payload, layout.blocks, 127 + mx_max_exponent<F>());
  if (bad_scale < layout.blocks) {
    return fail(ncclInvalidArgument,
                "%s: message scale of block %zu is 0x%02x, which no encoder writes (NaN, "
                "negative, or too large to decode within fp32)",
                name, bad_scale, payload[bad_scale]);
  }
  const uint8_t* codes = payload + layout.codes;
  const size_t code_bytes = layout.bytes - layout.codes;
  if (F::kBits == 8) {
    const size_t bad_code = block_scaled_bad_code<F>(codes, code_bytes);
    if (bad_code < code_bytes) {
      return fail(ncclInvalidArgument, "%s: message element %zu has code 0x%02x, a NaN or infinity",
                  name, bad_code, codes[bad_code]);
    }
  } else if (count % 2 != 0 && (codes[code_bytes - 1] >> 4) != 0) {
    return fail(ncclInvalidArgument, "%s: message padding nibble of code byte %zu is not zero",
                name, code_bytes - 1);
  }
  return ncclSuccess;
}

class BlockScaledCodec final : public Codec {
 public:
  BlockScaledCodec(BlockScaledKind kind, bool e5m2, bool stochastic)
      : kind_(kind), e5m2_(e5m2), stochastic_(stochastic) {}

  CodecId id() const override {
    return kind_ == BlockScaledKind::kMxfp8   ? CodecId::kMxfp8
           : kind_ == BlockScaledKind::kMxfp4 ? CodecId::kMxfp4
                                              : CodecId::kNvfp4;
  }
  CodecFamily family() const override { return CodecFamily::kDense; }
  std::string spec() const override {
    std::string text = kind_name(kind_);
    text += ":";
    if (kind_ == BlockScaledKind::kMxfp8) text += e5m2_ ? "elem=e5m2," : "elem=e4m3,";
    return text + "rounding=" + (stochastic_ ? "stochastic" : "nearest");
  }
  // Not even with stochastic rounding: an element the scale puts past the max normal saturates
  // towards zero whatever the rounding (the top of a block: MX's scale rule puts up to 1/8 of
  // the binade there, nvfp4's rounded block scale up to 2^-4), so a persistent gradient loses
  // part of it every step without error feedback.

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    return kWireHeaderBytes + block_scaled_layout(count, block(), bits()).bytes;
  }
  // Not linear: each rank's blocks have their own scales. The size depends on the count alone.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // The bounds at the top of the file.
  ErrorBound error_bound(size_t) const override {
    if (kind_ == BlockScaledKind::kNvfp4) {
      const double nearest = (1.0 + 1.0 / 16) / 6 + std::ldexp(1.0, -20);
      return ErrorBound::stated_as(stochastic_ ? 2 * nearest : nearest);
    }
    if (kind_ == BlockScaledKind::kMxfp4) return ErrorBound::stated_as(stochastic_ ? 0.5 : 0.25);
    return ErrorBound::stated_as(e5m2_ && stochastic_ ? 0.25 : 0.125);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    const char* name = kind_name(kind_);
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", name);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", name);
    if (message_bytes == nullptr) {
      return fail(ncclInvalidArgument, "%s: message_bytes is null", name);
    }
    const size_t bytes = max_finite_bytes(count, dtype);
    TERSE_CHECK(check_capacity(name, bytes, capacity));
    WireHeader header = make_header(id(), dtype, count);
    header.param0 = block();
    header.flags =
        (e5m2_ ? kBlockScaledE5M2Flag : 0) | (stochastic_ ? kBlockScaledStochasticFlag : 0);
    header.seed = stochastic_ ? context.seed : 0;
    uint8_t* payload = static_cast<uint8_t*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(launch_block_scaled_encode(kind_, e5m2_, stochastic_, dtype, input, count,
                                             header.seed, message, context.error, context.stream));
#endif
      *message_bytes = bytes;
      return ncclSuccess;
    }
    const size_t blocks = block_scaled_layout(count, block(), bits()).blocks;
    size_t first_bad = blocks;
    dispatch_dtype(dtype, [&](auto in) {
      using In = decltype(in);
      const auto* typed = static_cast<const typename In::Storage*>(input);
      if (kind_ == BlockScaledKind::kNvfp4) {
        const float tensor_scale = nv_tensor_scale(block_scaled_tensor_max<In>(typed, count));
        header.param1 = float_bits(tensor_scale);
        first_bad = dispatch_rounding(stochastic_, [&](auto stochastic) {
          return nv_encode_cpu<In, decltype(stochastic)::value>(
              typed, count, tensor_scale, header.seed, payload, context.error);
        });
        return;
      }
      first_bad = dispatch_element(kind_, e5m2_, [&](auto element) {
        return dispatch_rounding(stochastic_, [&](auto stochastic) {
          return mx_encode_cpu<In, decltype(element), decltype(stochastic)::value>(
              typed, count, header.seed, payload, context.error);
        });
      });
    });
    write_header(message, header);
    *message_bytes = bytes;
    if (first_bad < blocks) {
      const size_t first = first_bad * block();
      return fail(ncclInvalidArgument,
                  "%s: input block %zu (elements %zu..%zu) holds a NaN or infinity, which the "
                  "codec cannot represent",
                  name, first_bad, first, std::min<size_t>(first + block(), count) - 1);
    }
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    const char* name = kind_name(kind_);
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, id(), count, context, &header));
    const uint8_t known =
        kBlockScaledStochasticFlag | (kind_ == BlockScaledKind::kMxfp8 ? kBlockScaledE5M2Flag : 0);
    if ((header.flags & ~known) != 0) {
      return fail(ncclInvalidArgument, "%s: message flags 0x%02x hold unknown bits", name,
                  header.flags);
    }
    if (header.param0 != block()) {
      return fail(ncclInvalidArgument, "%s: message block=%u, the format's is %u", name,
                  header.param0, block());
    }
    if (kind_ != BlockScaledKind::kNvfp4 && header.param1 != 0) {
      return fail(ncclInvalidArgument, "%s: message param1=%u is not 0", name, header.param1);
    }
    const bool e5m2 = (header.flags & kBlockScaledE5M2Flag) != 0;
    const BlockScaledLayout layout = block_scaled_layout(count, block(), bits());
    TERSE_CHECK(check_payload(name, kWireHeaderBytes + layout.bytes, message_bytes));
    if (count > 0 && output == nullptr) {
      return fail(ncclInvalidArgument, "%s: output is null", name);
    }
    const float tensor_scale = bits_float(header.param1);
    const uint8_t* payload = static_cast<const uint8_t*>(message) + kWireHeaderBytes;
    const auto validate = [&](const uint8_t* host_payload) {
      return dispatch_element(kind_, e5m2, [&](auto element) {
        return validate_payload<decltype(element)>(name, kind_, host_payload, count, tensor_scale);
      });
    };
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name));
#if TERSE_HAVE_CUDA
      if (context.host_message != nullptr) {
        TERSE_CHECK(validate(static_cast<const uint8_t*>(context.host_message) + kWireHeaderBytes));
      } else {
        // Validation reads every scale and code; a copy to the host waits for the stream, as a
        // validation kernel would.
        std::vector<uint8_t> copy(layout.bytes);
        TERSE_CHECK(copy_block_scaled_payload(payload, layout.bytes, context.stream, copy.data()));
        TERSE_CHECK(validate(copy.data()));
      }
      return launch_block_scaled_decode(kind_, e5m2, payload, count, tensor_scale, dtype, output,
                                        accumulate, context.stream);
#endif
    }
    TERSE_CHECK(validate(payload));
    dispatch_dtype(dtype, [&](auto out) {
      using Out = decltype(out);
      auto* typed = static_cast<typename Out::Storage*>(output);
      dispatch_rounding(accumulate, [&](auto accumulate_type) {
        constexpr bool kAccumulate = decltype(accumulate_type)::value;
        if (kind_ == BlockScaledKind::kNvfp4) {
          nv_decode_cpu<Out, kAccumulate>(payload, count, tensor_scale, typed);
          return;
        }
        dispatch_element(kind_, e5m2, [&](auto element) {
          mx_decode_cpu<Out, decltype(element), kAccumulate>(payload, count, typed);
        });
      });
    });
    return ncclSuccess;
  }

 private:
  uint32_t block() const {
    return kind_ == BlockScaledKind::kNvfp4 ? kNvBlock : kMxBlock;
  }
  int bits() const {
    return kind_ == BlockScaledKind::kMxfp8 ? 8 : 4;
  }

  BlockScaledKind kind_;
  bool e5m2_;
  bool stochastic_;
};

ncclResult_t create_block_scaled_codec(BlockScaledKind kind, CodecParams& params,
                                       std::unique_ptr<Codec>* codec) {
  std::string element = "e4m3", rounding;
  if (kind == BlockScaledKind::kMxfp8) {
    TERSE_CHECK(params.get_choice("elem", {"e4m3", "e5m2"}, "e4m3", &element));
  }
  TERSE_CHECK(params.get_choice("rounding", {"nearest", "stochastic"}, "nearest", &rounding));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<BlockScaledCodec>(kind, element == "e5m2", rounding == "stochastic");
  return ncclSuccess;
}

}  // namespace

ncclResult_t create_mxfp8_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_block_scaled_codec(BlockScaledKind::kMxfp8, params, codec);
}

ncclResult_t create_mxfp4_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_block_scaled_codec(BlockScaledKind::kMxfp4, params, codec);
}

ncclResult_t create_nvfp4_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  return create_block_scaled_codec(BlockScaledKind::kNvfp4, params, codec);
}

}  // namespace terse
