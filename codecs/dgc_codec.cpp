// DGC, Deep Gradient Compression (Lin et al., ICLR 2018): Top-K with momentum correction, local
// gradient clipping, momentum factor masking and a warm-up sparsity schedule.
//
// Parameters: ratio (final density, default 0.001, in (0, 1]), momentum m (default 0.9, in
// [0, 1]), clip (local gradient-norm clipping threshold, 0 = off, the default; the paper scales
// the global threshold by N^-1/2 for N workers, which is the caller's to do), warmup_steps W
// (default 0 = off), method = sampled (default, the paper's sampled threshold) | exact.
//
// State (make_state, required): fp32 momentum u and velocity v, count each, allocated on the
// first encode in that encode's memory kind (host or device) and zero there. Per encode of g:
//   g <- g min(1, clip / ||g||)           local clipping (norm summed in a fixed order, dgc_math.h)
//   u <- m u + g,  v <- v + u              momentum correction
//   send v at the top-k of |v|             (topk_select.h: sampled keeps 1..k of the exact top k)
//   u, v <- 0 at the sent indices          momentum factor masking
// The residual of DGC lives in v, so EncodeContext::error must be null (a non-null error buffer
// is refused): the caller neither compensates nor keeps a residual (memory kind "momentum").
//
// Density: warm-up ramps it exponentially from 0.25 to ratio over the first W steps
// (EncodeContext::step s < W: 0.25 (ratio / 0.25)^(s / W); with ratio 0.001 the quarter points
// are within 1.3% of the paper's per-epoch 93.75%, 98.4% and 99.6% sparsity), then ratio; the
// policy's warmup_progress p then raises it to the power p. k = round(density count), >= 1.
//
// Payload (sparse_message.h): k, k uint32 indices increasing, k fp32 values of v (fp32 whatever
// the input type: v is an fp32 sum). Wire bytes: 32 + 8 k. Decoded values equal v exactly.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/dgc_math.h"
#include "codecs/sparse_density.h"
#include "codecs/sparse_encode.h"
#include "codecs/sparse_message.h"
#include "codecs/topk_select.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/cuda/dgc_kernels.h"
#include "codecs/cuda/sparse_encode_kernels.h"
#include "codecs/cuda/sparse_select_kernels.h"
#endif

namespace terse {
namespace {

constexpr const char* kName = "dgc";
constexpr double kWarmupStartDensity = 0.25;

// u and v, `count` fp32 each, in one allocation; host or device as the first encode decides.
class DgcState final : public CodecState {
 public:
  explicit DgcState(size_t count) : count_(count) {}
  ~DgcState() override {
#if TERSE_HAVE_CUDA
    if (device_ != nullptr) release_when_allowed([state = device_] { cudaFree(state); });
#endif
  }
  DgcState(const DgcState&) = delete;
  DgcState& operator=(const DgcState&) = delete;

  size_t bytes() const override {
    return 2 * count_ * sizeof(float);
  }
  size_t count() const {
    return count_;
  }

  // Allocates zeroed u and v in `memory` on first use; refuses a later switch of memory kind.
  ncclResult_t prepare(Memory memory, void* stream) {
    if (ready_) {
      if (memory == memory_) return ncclSuccess;
      return fail(ncclInvalidArgument,
                  "%s: the state holds %s memory, this encode passes %s memory", kName,
                  memory_ == Memory::kHost ? "host" : "device",
                  memory == Memory::kHost ? "host" : "device");
    }
    memory_ = memory;
    if (memory == Memory::kDevice) {
#if TERSE_HAVE_CUDA
      size_t bytes = std::max<size_t>(1, this->bytes());
      TERSE_CHECK(require_allocation_allowed("dgc state", bytes));
      cudaError_t error = cudaMalloc(&device_, bytes);
      if (error == cudaSuccess) {
        error = cudaMemsetAsync(device_, 0, bytes, static_cast<cudaStream_t>(stream));
      }
      if (error != cudaSuccess) {
        const std::string what =
            std::string(kName) + ": allocating " + std::to_string(bytes) + " bytes of state";
        return cuda_call_failed(error, what.c_str());
      }
#else
      (void)stream;
      return require_cuda(kName);
#endif
    } else {
      host_.assign(2 * count_, 0.0f);
    }
    ready_ = true;
    return ncclSuccess;
  }

  float* momentum() {
    return memory_ == Memory::kDevice ? device_ : host_.data();
  }
  float* velocity() {
    return momentum() + count_;
  }

 private:
  size_t count_;
  bool ready_ = false;
  Memory memory_ = Memory::kHost;
  std::vector<float> host_;
  float* device_ = nullptr;
};

// Pairwise tree over one chunk (dgc_math.h): s[t] += s[t + stride], stride kNormChunk/2 .. 1.
TERSE_CPU_DISPATCH double reduce_tree(double* __restrict__ tree) {
  for (size_t stride = kNormChunk / 2; stride > 0; stride /= 2) {
    for (size_t t = 0; t < stride; ++t) tree[t] += tree[t + stride];
  }
  return tree[0];
}

// Chunk `chunk` of the first level: squares of the input, zero past the end.
template <typename In>
TERSE_CPU_DISPATCH double square_chunk_sum(const typename In::Storage* __restrict__ x, size_t count,
                                           size_t chunk) {
  double tree[kNormChunk];
  const size_t base = chunk * kNormChunk;
  const size_t valid = std::min(kNormChunk, count - base);
  for (size_t t = 0; t < valid; ++t) {
    double value = In::load(x[base + t]);
    tree[t] = value * value;
  }
  for (size_t t = valid; t < kNormChunk; ++t) tree[t] = 0.0;
  return reduce_tree(tree);
}

// Sum of squares of the input in the fixed order of dgc_math.h (the GPU's order too).
template <typename In>
double sum_squares_host(const typename In::Storage* x, size_t count) {
  std::vector<double> sums((count + kNormChunk - 1) / kNormChunk);
  for (size_t chunk = 0; chunk < sums.size(); ++chunk) {
    sums[chunk] = square_chunk_sum<In>(x, count, chunk);
  }
  double tree[kNormChunk];
  while (sums.size() > 1) {
    std::vector<double> next((sums.size() + kNormChunk - 1) / kNormChunk);
    for (size_t chunk = 0; chunk < next.size(); ++chunk) {
      for (size_t t = 0; t < kNormChunk; ++t) {
        tree[t] = value_or_zero(sums.data(), sums.size(), chunk * kNormChunk + t);
      }
      next[chunk] = reduce_tree(tree);
    }
    sums.swap(next);
  }
  return sums.empty() ? 0.0 : sums[0];
}

template <typename In>
TERSE_CPU_DISPATCH void dgc_update_host(const typename In::Storage* __restrict__ x, size_t count,
                                        float scale, float momentum, float* __restrict__ u,
                                        float* __restrict__ v) {
  for (size_t i = 0; i < count; ++i) dgc_update_element<In>(x, scale, momentum, u, v, i);
}

class DgcCodec final : public Codec {
 public:
  DgcCodec(double ratio, double momentum, double clip, long long warmup_steps, SelectMethod method)
      : ratio_(ratio),
        momentum_(momentum),
        clip_(clip),
        warmup_steps_(warmup_steps),
        method_(method) {}

  CodecId id() const override { return CodecId::kDgc; }
  CodecFamily family() const override { return CodecFamily::kSparse; }
  std::string spec() const override {
    return std::string(kName) + ":ratio=" + spec_number(ratio_) +
           ",momentum=" + spec_number(momentum_) + ",clip=" + spec_number(clip_) +
           ",warmup_steps=" + std::to_string(warmup_steps_) +
           ",method=" + (method_ == SelectMethod::kExact ? "exact" : "sampled");
  }

  // The policy's warm-up can ask for any density up to 1, so the bound is every element kept.
  size_t max_finite_bytes(size_t count, DType dtype) const override {
    (void)dtype;
    return SparseLayout{count, DType::kFloat32, true}.bytes();
  }

  // Not linear: each rank keeps its own largest velocities. After the warm-up schedule,
  // k = round(ratio count) (at least 1) with fp32 values whatever the input type; sampled keeps
  // at most k (usually k), so this is its largest message.
  size_t wire_bytes(size_t count, DType, const MatrixShape&) const override {
    return SparseLayout{kept_count(count, ratio_), DType::kFloat32, true}.bytes();
  }
  // The first encode of a fresh state sends the top k of the (clipped) gradient itself: kept
  // values move by at most |x| (clipping scales them down), dropped ones by |x|. Later steps send
  // accumulated velocities and are bounded by the momentum, not by this step's gradient.
  ErrorBound error_bound(size_t) const override { return ErrorBound::stated_as(1.0); }
  bool stateful(size_t, DType, const MatrixShape&) const override { return true; }

  std::unique_ptr<CodecState> make_state(size_t count, DType dtype,
                                         const MatrixShape& shape) const override {
    (void)dtype;
    (void)shape;
    return std::make_unique<DgcState>(count);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "%s: input is null", kName);
    if (message == nullptr) return fail(ncclInvalidArgument, "%s: message is null", kName);
    TERSE_CHECK(check_sparse_count(kName, count));
    if (context.error != nullptr) {
      return fail(ncclInvalidArgument,
                  "%s: EncodeContext.error must be null: dgc keeps its residual in its state "
                  "(the velocity v), use memory kind 'momentum'",
                  kName);
    }
    if (context.state == nullptr) {
      return fail(ncclInvalidArgument,
                  "%s: EncodeContext.state is null; dgc needs the state from make_state()", kName);
    }
    auto* state = dynamic_cast<DgcState*>(context.state);
    if (state == nullptr) {
      return fail(ncclInvalidArgument, "%s: EncodeContext.state was not made by dgc's make_state()",
                  kName);
    }
    if (state->count() != count) {
      return fail(ncclInvalidArgument, "%s: the state holds %zu elements, this encode passes %zu",
                  kName, state->count(), count);
    }
    double density = 0;
    TERSE_CHECK(
        ramp_density(kName, scheduled_density(context.step), context.warmup_progress, &density));
    const size_t k = kept_count(count, density);
    SparseLayout layout{k, DType::kFloat32, true};
    TERSE_CHECK(check_capacity(kName, layout.bytes(), capacity));
    TERSE_CHECK(state->prepare(context.memory, context.stream));
    float* u = state->momentum();
    float* v = state->velocity();
    const float momentum = static_cast<float>(momentum_);
    const float clip = static_cast<float>(clip_);
    char* bytes = static_cast<char*>(message);
    uint32_t* indices = reinterpret_cast<uint32_t*>(bytes + kWireHeaderBytes);
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(launch_dgc_update(dtype, input, count, clip, momentum, u, v, context.stream));
      SamplePlan plan = method_ == SelectMethod::kSampled ? plan_sample(count, k) : SamplePlan{};
      TERSE_CHECK(launch_select_top_k(DType::kFloat32, v, count, k, plan, indices, &layout.kept,
                                      context.stream));
      TERSE_CHECK(launch_gather_sparse_values(DType::kFloat32, v, count, indices, 0, layout.kept,
                                              bytes + layout.values_offset(), context.stream));
      TERSE_CHECK(launch_dgc_mask(indices, layout.kept, u, v, context.stream));
#endif
    } else {
      dispatch_dtype(dtype, [&](auto in) {
        using In = decltype(in);
        auto x = static_cast<const typename In::Storage*>(input);
        float scale = clip > 0.0f ? clip_scale(sum_squares_host<In>(x, count), clip) : 1.0f;
        dgc_update_host<In>(x, count, scale, momentum, u, v);
      });
      layout.kept =
          select_top_k_host(DType::kFloat32, v, count, k, method_, indices, context.workspace);
      for (size_t j = 0; j < layout.kept; ++j) {
        u[indices[j]] = 0.0f;
        v[indices[j]] = 0.0f;
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
    return decode_sparse(SparseRules{kName, CodecId::kDgc, true, 0}, message, message_bytes, output,
                         count, dtype, accumulate, context);
  }

 private:
  // The warm-up schedule: exponential from kWarmupStartDensity to ratio over warmup_steps.
  double scheduled_density(uint64_t step) const {
    if (warmup_steps_ <= 0 || step >= static_cast<uint64_t>(warmup_steps_) ||
        ratio_ >= kWarmupStartDensity) {
      return ratio_;
    }
    double fraction = static_cast<double>(step) / static_cast<double>(warmup_steps_);
    return kWarmupStartDensity * std::pow(ratio_ / kWarmupStartDensity, fraction);
  }

  double ratio_;
  double momentum_;
  double clip_;
  long long warmup_steps_;
  SelectMethod method_;
};

}  // namespace

ncclResult_t create_dgc_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  double ratio = 0, momentum = 0, clip = 0;
  long long warmup_steps = 0;
  std::string method;
  TERSE_CHECK(params.get_double("ratio", 0.001, 0.0, 1.0, &ratio));
  TERSE_CHECK(params.get_double("momentum", 0.9, 0.0, 1.0, &momentum));
  TERSE_CHECK(params.get_double("clip", 0.0, 0.0, FLT_MAX, &clip));
  TERSE_CHECK(params.get_int("warmup_steps", 0, 0, 1000000000LL, &warmup_steps));
  TERSE_CHECK(params.get_choice("method", {"sampled", "exact"}, "sampled", &method));
  TERSE_CHECK(params.finish());
  if (!(ratio > 0.0)) {
    return fail(ncclInvalidArgument, "codec dgc: parameter ratio=%g must be above 0", ratio);
  }
  *codec =
      std::make_unique<DgcCodec>(ratio, momentum, clip, warmup_steps,
                                 method == "exact" ? SelectMethod::kExact : SelectMethod::kSampled);
  return ncclSuccess;
}

}  // namespace terse
