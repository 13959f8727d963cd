// Threshold sparsification: keep every element with |x| >= t, send (index, value) pairs.
//
// Parameter: threshold = t (absolute, default 0.001, in [0, FLT_MAX]; rounded to fp32). The
// comparison is on magnitude_key (sparse_math.h), so NaN is always kept. The number kept depends
// on the data: the message is 32 + n (4 + sizeof(input element)) bytes for n kept elements, and
// max_finite_bytes (the bound every encode needs as capacity) is that for n = count. A device
// encode synchronises its stream to learn n.
//
// Payload (sparse_message.h): n, n uint32 indices increasing, n values in the input's type.
//
// Stated bound: kept values are exact, dropped ones are below t in magnitude, so for finite x
// |x_i - decoded_i| < t for every i, and error = x - decoded is exactly x off the kept set.
#include <cfloat>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/sparse_density.h"
#include "codecs/sparse_encode.h"
#include "codecs/sparse_math.h"
#include "codecs/sparse_message.h"
#include "codecs/topk_select.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/sparse_encode_kernels.h"
#include "codecs/cuda/sparse_select_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "threshold";

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(double threshold)
      : threshold_(threshold), min_key_(magnitude_key(static_cast<float>(threshold))) {}

  CodecId id() const override { return CodecId::kThreshold; }
  CodecFamily family() const override { return CodecFamily::kSparse; }
  std::string spec() const override {
    return std::string(kName) + ":threshold=" + spec_number(threshold_);
  }

  size_t max_finite_bytes(size_t count, DType dtype) const override {
    return SparseLayout{count, dtype, true}.bytes();
  }

  // Not linear: each rank keeps its own positions. How many pass depends on the data, so the
  // stated size is the most: every element kept.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  // Kept values are exact and a dropped one moves by |x| < t; relative to the tensor that is
  // |x| <= max|x| (t says nothing about the tensor's scale).
  ErrorBound error_bound(size_t) const override { return ErrorBound::stated_as(1.0); }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", kName);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", kName);
    TERSE_CHECK(check_sparse_count(kName, count));
    // How many survive is known only after the pass, so the capacity must cover them all.
    TERSE_CHECK(check_capacity(kName, max_finite_bytes(count, dtype), capacity));
    char* bytes = static_cast<char*>(message);
    uint32_t* indices = reinterpret_cast<uint32_t*>(bytes + kWireHeaderBytes);
    SparseLayout layout{0, dtype, true};
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(launch_select_at_least(dtype, input, count, min_key_, indices, &layout.kept,
                                         context.stream));
      TERSE_CHECK(launch_gather_sparse_values(dtype, input, count, indices, 0, layout.kept,
                                              bytes + layout.values_offset(), context.stream));
      if (context.error != nullptr) {
        TERSE_CHECK(launch_sparse_error(dtype, input, count, indices, 0, layout.kept, false,
                                        context.error, context.stream));
      }
#endif
    } else {
      layout.kept = select_at_least_host(dtype, input, count, min_key_, indices);
      gather_sparse_values(dtype, input, count, indices, 0, layout.kept,
                           bytes + layout.values_offset());
      if (context.error != nullptr) {
        sparse_error(dtype, input, count, indices, 0, layout.kept, false, context.error);
      }
    }
    TERSE_CHECK(write_sparse_header(message, sparse_header(id(), dtype, count, layout, 0, 0),
                                    context.memory, context.stream));
    *message_bytes = layout.bytes();
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    return decode_sparse(SparseRules{kName, CodecId::kThreshold, false, 0}, message, message_bytes,
                         output, count, dtype, accumulate, context);
  }

 private:
  double threshold_;
  uint32_t min_key_;
};

}  // namespace

ncclResult_t create_threshold_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  double threshold = 0;
  TERSE_CHECK(params.get_double("threshold", 0.001, 0.0, FLT_MAX, &threshold));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<ThresholdCodec>(threshold);
  return ncclSuccess;
}

}  // namespace terse
