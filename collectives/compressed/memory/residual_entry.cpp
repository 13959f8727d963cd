#include "collectives/compressed/memory/residual_entry.h"

#include <cstdint>
#include <utility>

#include "codecs/device_support.h"
#include "codecs/residual_math.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/residual_kernels.h"
#endif

namespace terse {
namespace {

// Plain loops over the shared element math; target_clones gives them AVX2/AVX-512 bodies.
template <typename In>
TERSE_CPU_DISPATCH void compensate_cpu(const typename In::Storage* __restrict__ input,
                                       const float* __restrict__ residual,
                                       float* __restrict__ compensated, size_t count) {
  for (size_t i = 0; i < count; ++i) compensate_element<In>(input, residual, compensated, i);
}

template <typename Decoded>
TERSE_CPU_DISPATCH void update_residual_cpu(const float* __restrict__ compensated,
                                            const typename Decoded::Storage* __restrict__ decoded,
                                            float* __restrict__ residual, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    update_residual_element<Decoded>(compensated, decoded, residual, i);
  }
}

}  // namespace

ResidualEntry::ResidualEntry(TensorKey key, MemoryKind kind, std::string codec_spec,
                             const MatrixShape& shape, ResidualBuffer residual,
                             std::unique_ptr<CodecState> state, ResidualBuffer stage_residual)
    : key_(std::move(key)),
      kind_(kind),
      codec_spec_(std::move(codec_spec)),
      shape_(shape),
      residual_(std::move(residual)),
      state_(std::move(state)),
      stage_residual_(std::move(stage_residual)) {}

size_t ResidualEntry::bytes() const {
  return residual_.bytes() + (state_ ? state_->bytes() : 0) + stage_residual_.bytes();
}

ncclResult_t ResidualEntry::check_call(const char* what, size_t count, bool buffers_given) const {
  if (kind_ != MemoryKind::kResidual) {
    return fail(ncclInvalidUsage,
                "residual %s for %s: the entry keeps no residual (memory %s); encode the input "
                "directly",
                what, key_.describe().c_str(), memory_kind_name(kind_));
  }
  if (count != key_.count) {
    return fail(ncclInvalidArgument, "residual %s for %s: count %zu differs from the entry's %zu",
                what, key_.describe().c_str(), count, key_.count);
  }
  if (count != 0 && !buffers_given) {
    return fail(ncclInvalidArgument, "residual %s for %s: a buffer is null", what,
                key_.describe().c_str());
  }
  if (residual_.memory() == Memory::kDevice) TERSE_CHECK(require_cuda("residual memory"));
  return ncclSuccess;
}

ncclResult_t ResidualEntry::compensate(const void* input, size_t count, DType dtype,
                                       float* compensated, void* stream) const {
  TERSE_CHECK(check_call("compensate", count, input != nullptr && compensated != nullptr));
  if (dtype != key_.dtype) {
    return fail(ncclInvalidArgument,
                "residual compensate for %s: dtype %s differs from the entry's",
                key_.describe().c_str(), dtype_name(dtype));
  }
  // Compared as integers: ordering unrelated pointers is unspecified in C++.
  const uintptr_t out = reinterpret_cast<uintptr_t>(compensated);
  const uintptr_t residual = reinterpret_cast<uintptr_t>(residual_.data());
  const uintptr_t bytes = count * sizeof(float);
  if (count != 0 && out < residual + bytes && residual < out + bytes) {
    return fail(ncclInvalidArgument,
                "residual compensate for %s: the output overlaps the residual; pass a scratch "
                "buffer",
                key_.describe().c_str());
  }
  if (residual_.memory() == Memory::kDevice) {
#if TERSE_HAVE_CUDA
    return launch_residual_compensate(dtype, input, residual_.data(), compensated, count, stream);
#endif
  }
  (void)stream;
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    compensate_cpu<In>(static_cast<const typename In::Storage*>(input), residual_.data(),
                       compensated, count);
  });
  return ncclSuccess;
}

ncclResult_t ResidualEntry::update(const float* compensated, const void* decoded,
                                   DType decoded_dtype, size_t count, void* stream) {
  TERSE_CHECK(check_call("update", count, compensated != nullptr && decoded != nullptr));
  if (residual_.memory() == Memory::kDevice) {
#if TERSE_HAVE_CUDA
    return launch_residual_update(decoded_dtype, compensated, decoded, residual_.data(), count,
                                  stream);
#endif
  }
  (void)stream;
  dispatch_dtype(decoded_dtype, [&](auto out) {
    using Decoded = decltype(out);
    update_residual_cpu<Decoded>(compensated,
                                 static_cast<const typename Decoded::Storage*>(decoded),
                                 residual_.data(), count);
  });
  return ncclSuccess;
}

void ResidualEntry::attach_to(EncodeContext* context) const {
  context->error = residual_.data();
  context->state = state_.get();
  context->memory = residual_.memory();
}

}  // namespace terse
