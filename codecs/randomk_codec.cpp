// Random-K sparsification: keep k elements drawn at random from EncodeContext::seed.
//
// Parameters: ratio (fraction kept, default 0.01, in (0, 1]; warm-up progress p makes it
// ratio^p), shared_seed (default true), unbiased (default true).
//
// Selection is stratified: [0, count) is split into k near-equal strata (sparse_math.h) and one
// counter-RNG position is drawn in each, so exactly k distinct, increasing indices are kept and
// element i of a stratum of length L is kept with probability 1/L (within a relative 2^-32 L).
// With unbiased, decode multiplies each value by its stratum's length L, so E[decoded_i] = x_i
// and Var[decoded_i] = (L - 1) x_i^2; without it the values are sent as they are (a biased,
// error-feedback-friendly Random-K).
//
// With shared_seed every rank passes the same seed, so the indices need not travel: the header
// carries the seed and the decoder draws the same positions. Without it the indices are sent.
// Payload (sparse_message.h): flags kSparseImplicitIndices (shared_seed) and kSparseStratumScaled
// (unbiased), seed in the header; [k uint32 indices]; k values in the input's type (the scale is
// applied on decode, so values stay exact input elements). Wire bytes: 32 + k sizeof(element)
// with shared_seed (ratio on any dtype, plus the header), 32 + k (4 + sizeof(element)) without.
#include <cmath>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/sparse_density.h"
#include "codecs/sparse_encode.h"
#include "codecs/sparse_math.h"
#include "codecs/sparse_message.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/sparse_encode_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "randomk";

class RandomKCodec final : public Codec {
 public:
  RandomKCodec(double ratio, bool shared_seed, bool unbiased)
      : ratio_(ratio), shared_seed_(shared_seed), unbiased_(unbiased) {}

  CodecId id() const override { return CodecId::kRandomK; }
  CodecFamily family() const override { return CodecFamily::kSparse; }
  bool stable_under_error_feedback() const override { return !unbiased_; }
  bool unbiased() const override { return unbiased_; }
  std::string spec() const override {
    return std::string(kName) + ":ratio=" + spec_number(ratio_) +
           ",shared_seed=" + (shared_seed_ ? "true" : "false") +
           ",unbiased=" + (unbiased_ ? "true" : "false");
  }

  // Warm-up can ask for any density up to 1, so the bound is every element kept.
  size_t max_finite_bytes(size_t count, DType dtype) const override {
    return SparseLayout{count, dtype, !shared_seed_}.bytes();
  }

  // With a shared seed every rank keeps the same positions and the stratum scaling is applied on
  // decode, so the k values add: a dense sum of them is the message of the sum.
  bool linear() const override { return shared_seed_; }
  bool needs_shared_seed() const override { return shared_seed_; }
  // k = round(ratio count), at least 1; indices travel only without a shared seed.
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return SparseLayout{kept_count(count, ratio_), dtype, !shared_seed_}.bytes();
  }
  // Unbiased: a kept value is scaled by its stratum's length L <= ceil(count / k), so it moves by
  // (L - 1)|x|; a dropped one by |x|. Biased: kept values are exact, dropped ones move by |x|.
  ErrorBound error_bound(size_t count) const override {
    ErrorBound bound;
    bound.stated = true;
    bound.factor = 1.0;
    if (unbiased_) {
      const size_t kept = kept_count(count, ratio_);
      const double longest = kept == 0 ? 1.0 : std::ceil(double(count) / double(kept));
      bound.factor = longest > 2 ? longest - 1 : 1.0;
    }
    return bound;
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", kName);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", kName);
    TERSE_CHECK(check_sparse_count(kName, count));
    double density = 0;
    TERSE_CHECK(ramp_density(kName, ratio_, context.warmup_progress, &density));
    SparseLayout layout{kept_count(count, density), dtype, !shared_seed_};
    TERSE_CHECK(check_capacity(kName, layout.bytes(), capacity));
    const uint8_t flags =
        (shared_seed_ ? kSparseImplicitIndices : 0) | (unbiased_ ? kSparseStratumScaled : 0);
    const uint64_t seed = context.seed;
    char* bytes = static_cast<char*>(message);
    // Null when the indices stay implicit: the helpers then draw them from the seed.
    uint32_t* indices =
        shared_seed_ ? nullptr : reinterpret_cast<uint32_t*>(bytes + kWireHeaderBytes);
    void* values = bytes + layout.values_offset();
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      if (indices != nullptr) {
        TERSE_CHECK(launch_stratum_indices(seed, count, layout.kept, indices, context.stream));
      }
      TERSE_CHECK(launch_gather_sparse_values(dtype, input, count, indices, seed, layout.kept,
                                              values, context.stream));
      if (context.error != nullptr) {
        TERSE_CHECK(launch_sparse_error(dtype, input, count, indices, seed, layout.kept, unbiased_,
                                        context.error, context.stream));
      }
#endif
    } else {
      if (indices != nullptr) {
        for_each_kept(nullptr, seed, count, layout.kept, [&](uint64_t j, uint64_t index, uint64_t) {
          indices[j] = static_cast<uint32_t>(index);
        });
      }
      gather_sparse_values(dtype, input, count, indices, seed, layout.kept, values);
      if (context.error != nullptr) {
        sparse_error(dtype, input, count, indices, seed, layout.kept, unbiased_, context.error);
      }
    }
    TERSE_CHECK(write_sparse_header(message, sparse_header(id(), dtype, count, layout, flags, seed),
                                    context.memory, context.stream));
    *message_bytes = layout.bytes();
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    return decode_sparse(
        SparseRules{kName, CodecId::kRandomK, false, kSparseImplicitIndices | kSparseStratumScaled},
        message, message_bytes, output, count, dtype, accumulate, context);
  }

 private:
  double ratio_;
  bool shared_seed_;
  bool unbiased_;
};

}  // namespace

ncclResult_t create_randomk_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  double ratio = 0;
  bool shared_seed = true, unbiased = true;
  TERSE_CHECK(params.get_double("ratio", 0.01, 0.0, 1.0, &ratio));
  TERSE_CHECK(params.get_bool("shared_seed", true, &shared_seed));
  TERSE_CHECK(params.get_bool("unbiased", true, &unbiased));
  TERSE_CHECK(params.finish());
  if (!(ratio > 0.0)) {
    return fail(ncclInvalidArgument, "codec randomk: parameter ratio=%g must be above 0", ratio);
  }
  *codec = std::make_unique<RandomKCodec>(ratio, shared_seed, unbiased);
  return ncclSuccess;
}

}  // namespace terse
