// The cast codecs: `none` (the input's own type on the wire, lossless), `fp16` and `bf16`
// (round to nearest even). Payload: `count` elements of the wire type, right after the header.
// Relative error per element: 0 for none, 2^-11 for fp16 (within its range), 2^-8 for bf16.
#include <cmath>
#include <memory>
#include <string>

#include "codecs/cast_math.h"
#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/cast_kernels.h"
#endif

namespace terse {
namespace {

// The optional error output and accumulation are hoisted out of the loops (GCC does not
// unswitch them before vectorising), so each loop body is straight-line code.
template <typename In, typename Wire>
TERSE_CPU_DISPATCH void cast_encode_cpu(const typename In::Storage* input,
                                        typename Wire::Storage* payload, float* error,
                                        size_t count) {
  if (error == nullptr) {
    for (size_t i = 0; i < count; ++i) cast_encode_element<In, Wire>(input, payload, nullptr, i);
  } else {
    for (size_t i = 0; i < count; ++i) cast_encode_element<In, Wire>(input, payload, error, i);
  }
}

template <typename Wire, typename Out>
TERSE_CPU_DISPATCH void cast_decode_cpu(const typename Wire::Storage* payload,
                                        typename Out::Storage* output, bool accumulate,
                                        size_t count) {
  if (accumulate) {
    for (size_t i = 0; i < count; ++i) cast_decode_element<Wire, Out>(payload, output, true, i);
  } else {
    for (size_t i = 0; i < count; ++i) cast_decode_element<Wire, Out>(payload, output, false, i);
  }
}

class CastCodec final : public Codec {
 public:
  // `wire_type` null means the input's own type (the `none` codec).
  CastCodec(CodecId id, const char* name, const DType* wire_type)
      : id_(id),
        name_(name),
        has_wire_type_(wire_type != nullptr),
        wire_type_(wire_type ? *wire_type : DType::kFloat32) {}

  CodecId id() const override { return id_; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  bool unbiased() const override { return true; }
  std::string spec() const override { return name_; }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    return kWireHeaderBytes + count * dtype_size(wire_type_for(dtype));
  }

  // The payload is the values themselves in the wire type: a sum of payloads is the sum, rounded
  // once to the wire type.
  bool linear() const override { return true; }
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // Round to nearest even: half a unit in the last place, relative per element, so at most that
  // times max|x| (fp16 within its normal range; its subnormals, below 2^-14, add 2^-25 absolute).
  ErrorBound error_bound(size_t) const override {
    return ErrorBound::stated_as(!has_wire_type_                  ? 0.0
                                 : wire_type_ == DType::kFloat16  ? std::ldexp(1.0, -11)
                                 : wire_type_ == DType::kBFloat16 ? std::ldexp(1.0, -8)
                                                                  : 0.0);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", name_);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", name_);
    size_t bytes = max_finite_bytes(count, dtype);
    TERSE_CHECK(check_capacity(name_, bytes, capacity));
    DType wire_type = wire_type_for(dtype);
    WireHeader header = make_header(id_, dtype, count);
    header.param0 = static_cast<uint32_t>(wire_type);
    void* payload = static_cast<char*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name_));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(write_header_device(message, header, context.stream));
      TERSE_CHECK(launch_cast_encode(dtype, wire_type, input, payload, context.error, count,
                                     context.stream));
#endif
    } else {
      write_header(message, header);
      dispatch_dtype(dtype, [&](auto in) {
        using In = decltype(in);
        dispatch_dtype(wire_type, [&](auto wire) {
          using Wire = decltype(wire);
          cast_encode_cpu<In, Wire>(static_cast<const typename In::Storage*>(input),
                                    static_cast<typename Wire::Storage*>(payload), context.error,
                                    count);
        });
      });
    }
    *message_bytes = bytes;
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, id_, count, context, &header));
    // The wire type is in the header; for fp16/bf16 it must be the codec's own.
    if (header.param0 >= kDTypeCount ||
        (has_wire_type_ && header.param0 != static_cast<uint32_t>(wire_type_))) {
      return fail(ncclInvalidArgument, "%s: message wire type %u is not valid for this codec",
                  name_, header.param0);
    }
    DType wire_type = static_cast<DType>(header.param0);
    TERSE_CHECK(
        check_payload(name_, kWireHeaderBytes + count * dtype_size(wire_type), message_bytes));
    if (count > 0 && output == nullptr) {
      return fail(ncclInvalidArgument, "%s: output is null", name_);
    }
    const void* payload = static_cast<const char*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(name_));
#if TERSE_HAVE_CUDA
      return launch_cast_decode(wire_type, payload, dtype, output, count, accumulate,
                                context.stream);
#endif
    }
    dispatch_dtype(wire_type, [&](auto wire) {
      using Wire = decltype(wire);
      dispatch_dtype(dtype, [&](auto out) {
        using Out = decltype(out);
        cast_decode_cpu<Wire, Out>(static_cast<const typename Wire::Storage*>(payload),
                                   static_cast<typename Out::Storage*>(output), accumulate, count);
      });
    });
    return ncclSuccess;
  }

 private:
  DType wire_type_for(DType input_type) const {
    return has_wire_type_ ? wire_type_ : input_type;
  }

  CodecId id_;
  const char* name_;
  bool has_wire_type_;
  DType wire_type_;
};

}  // namespace

ncclResult_t create_none_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<CastCodec>(CodecId::kNone, "none", nullptr);
  return ncclSuccess;
}

ncclResult_t create_fp16_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  TERSE_CHECK(params.finish());
  const DType wire = DType::kFloat16;
  *codec = std::make_unique<CastCodec>(CodecId::kFp16, "fp16", &wire);
  return ncclSuccess;
}

ncclResult_t create_bf16_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  TERSE_CHECK(params.finish());
  const DType wire = DType::kBFloat16;
  *codec = std::make_unique<CastCodec>(CodecId::kBf16, "bf16", &wire);
  return ncclSuccess;
}

}  // namespace terse
