// Top-K sparsification: keep the k elements of largest magnitude, send (index, value) pairs.
//
// Parameters: ratio (fraction kept, default 0.01, in (0, 1]) or k (an absolute count, at most
// the tensor's size; the two are exclusive), method = sampled (default) | exact (see
// topk_select.h). EncodeContext::warmup_progress p turns the target density d (ratio, or k/count)
// into d^p.
//
// Payload (sparse_message.h): k = elements kept (exact: round(d count), at least 1; sampled: at
// most that), k uint32 indices increasing, k values in the input's type. Wire bytes are
// 32 + k (4 + sizeof(input element)): at ratio 0.01 on fp32, 0.02 of the input plus the header.
//
// Stated bounds: decoded values equal the input at the kept indices and are 0 elsewhere, so
// error = x - decoded is x off the kept set and 0 on it. Exact keeps the k largest magnitudes,
// hence ||x - decoded||^2 <= (1 - k/count) ||x||^2; sampled keeps a subset of them (the largest
// k' <= k), hence the same with k' in place of k.
//
// Error feedback fused (encode_compensated): v = input + residual is selected from in one pass
// over input and residual that leaves the error (v off the kept set, 0 on it) in the residual
// (select_top_k_compensated_host); the message is the one encode would give for v in fp32. A
// ratio keeps the same fraction of any part (keeps_fraction), so sparse allgather encodes top-k
// by ratio chunk by chunk, each chunk keeping round(ratio * chunk) of its own largest.
#include <algorithm>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/sparse_density.h"
#include "codecs/sparse_encode.h"
#include "codecs/sparse_message.h"
#include "codecs/topk_select.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/sparse_encode_kernels.h"
#include "codecs/cuda/sparse_select_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "topk";

class TopKCodec final : public Codec {
 public:
  // `fixed_k` 0 means "use `ratio`".
  TopKCodec(double ratio, size_t fixed_k, SelectMethod method)
      : ratio_(ratio), fixed_k_(fixed_k), method_(method) {}

  CodecId id() const override { return CodecId::kTopK; }
  CodecFamily family() const override { return CodecFamily::kSparse; }
  std::string spec() const override {
    std::string amount =
        fixed_k_ != 0 ? "k=" + std::to_string(fixed_k_) : "ratio=" + spec_number(ratio_);
    return std::string(kName) + ":" + amount +
           ",method=" + (method_ == SelectMethod::kExact ? "exact" : "sampled");
  }

  // Warm-up can ask for any density up to 1, so the bound is every element kept.
  size_t max_finite_bytes(size_t count, DType dtype) const override {
    return SparseLayout{count, dtype, true}.bytes();
  }

  // Not linear: each rank keeps its own largest positions. k = round(ratio count) (at least 1)
  // or min(k, count); sampled keeps at most k (usually k), so this is its largest message.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    size_t k = 0;
    if (wanted(count, 1.0, &k) != ncclSuccess) k = count;
    return SparseLayout{k, dtype, true}.bytes();
  }
  // Kept values are exact and a dropped one moves by |x| <= max|x|.
  ErrorBound error_bound(size_t) const override { return ErrorBound::stated_as(1.0); }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", kName);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", kName);
    TERSE_CHECK(check_sparse_count(kName, count));
    size_t k = 0;
    TERSE_CHECK(wanted(count, context.warmup_progress, &k));
    SparseLayout layout{k, dtype, true};
    // Sampled may keep fewer than k; the capacity must hold k.
    TERSE_CHECK(check_capacity(kName, layout.bytes(), capacity));
    char* bytes = static_cast<char*>(message);
    uint32_t* indices = reinterpret_cast<uint32_t*>(bytes + kWireHeaderBytes);
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      SamplePlan plan = method_ == SelectMethod::kSampled ? plan_sample(count, k) : SamplePlan{};
      TERSE_CHECK(
          launch_select_top_k(dtype, input, count, k, plan, indices, &layout.kept, context.stream));
      TERSE_CHECK(launch_gather_sparse_values(dtype, input, count, indices, 0, layout.kept,
                                              bytes + layout.values_offset(), context.stream));
      if (context.error != nullptr) {
        TERSE_CHECK(launch_sparse_error(dtype, input, count, indices, 0, layout.kept, false,
                                        context.error, context.stream));
      }
#endif
    } else {
      layout.kept = select_top_k_host(dtype, input, count, k, method_, indices, context.workspace);
      if (context.error != nullptr) {
        sparse_error(dtype, input, count, indices, 0, layout.kept, false, context.error);
      }
    }
    TERSE_CHECK(write_sparse_header(message, sparse_header(id(), dtype, count, layout, 0, 0),
                                    context.memory, context.stream));
    *message_bytes = layout.bytes();
    return ncclSuccess;
  }

  // A ratio keeps round(ratio * part) of every part; a fixed k would keep k of each.
  bool keeps_fraction() const override {
    return fixed_k_ == 0;
  }
  bool fuses_compensation() const override {
    return true;
  }

  // One pass over input and residual (select_top_k_compensated_host); the values sent are v's,
  // fp32, as encode_finite of v would send them.
  ncclResult_t encode_compensated_finite(const void* input, DType dtype, float* residual,
                                         size_t count, const EncodeContext& context, void* message,
                                         size_t capacity, size_t* message_bytes,
                                         bool* finite) override {
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", kName);
    TERSE_CHECK(check_sparse_count(kName, count));
    size_t k = 0;
    TERSE_CHECK(wanted(count, context.warmup_progress, &k));
    SparseLayout layout{k, DType::kFloat32, true};
    TERSE_CHECK(check_capacity(kName, layout.bytes(), capacity));
    char* bytes = static_cast<char*>(message);
    const CompensatedSelection selection = select_top_k_compensated_host(
        dtype, input, residual, count, k, method_, bytes + kWireHeaderBytes, context.workspace);
    *finite = selection.finite;
    if (!selection.finite) return ncclSuccess;
    layout.kept = selection.kept;
    write_header(message, sparse_header(id(), DType::kFloat32, count, layout, 0, 0));
    *message_bytes = layout.bytes();
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    return decode_sparse(SparseRules{kName, CodecId::kTopK, false, 0}, message, message_bytes,
                         output, count, dtype, accumulate, context);
  }

 private:
  // k for this call: the target density under the warm-up ramp.
  ncclResult_t wanted(size_t count, double progress, size_t* k) const {
    double target = ratio_;
    if (fixed_k_ != 0) {
      if (progress == 1.0) {
        *k = std::min(fixed_k_, count);
        return ncclSuccess;
      }
      target = count == 0 ? 1.0 : std::min(1.0, static_cast<double>(fixed_k_) / count);
    }
    double density = 0;
    TERSE_CHECK(ramp_density(kName, target, progress, &density));
    *k = kept_count(count, density);
    return ncclSuccess;
  }

  double ratio_;
  size_t fixed_k_;
  SelectMethod method_;
};

}  // namespace

ncclResult_t create_topk_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  const bool has_ratio = params.has("ratio"), has_k = params.has("k");
  double ratio = 0;
  long long k = 0;
  std::string method;
  TERSE_CHECK(params.get_double("ratio", 0.01, 0.0, 1.0, &ratio));
  TERSE_CHECK(params.get_int("k", 0, 1, static_cast<long long>(kMaxSparseCount), &k));
  TERSE_CHECK(params.get_choice("method", {"sampled", "exact"}, "sampled", &method));
  TERSE_CHECK(params.finish());
  if (has_ratio && has_k) {
    return fail(ncclInvalidArgument, "codec topk: parameters ratio and k exclude each other");
  }
  if (!(ratio > 0.0)) {
    return fail(ncclInvalidArgument, "codec topk: parameter ratio=%g must be above 0", ratio);
  }
  *codec = std::make_unique<TopKCodec>(
      ratio, static_cast<size_t>(k),
      method == "exact" ? SelectMethod::kExact : SelectMethod::kSampled);
  return ncclSuccess;
}

}  // namespace terse
