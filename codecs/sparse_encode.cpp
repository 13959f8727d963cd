#include "codecs/sparse_encode.h"

#include "codecs/sparse_math.h"

namespace terse {
namespace {

template <typename In>
TERSE_CPU_DISPATCH void load_all(const typename In::Storage* __restrict__ x, size_t count,
                                 float* __restrict__ error) {
  for (size_t i = 0; i < count; ++i) error[i] = In::load(x[i]);
}

}  // namespace

void gather_sparse_values(DType dtype, const void* data, size_t count, const uint32_t* indices,
                          uint64_t seed, size_t kept, void* values) {
  dispatch_dtype(dtype, [&](auto in) {
    using Storage = typename decltype(in)::Storage;
    auto x = static_cast<const Storage*>(data);
    auto out = static_cast<Storage*>(values);
    for_each_kept(indices, seed, count, kept,
                  [&](uint64_t j, uint64_t index, uint64_t) { out[j] = x[index]; });
  });
}

void sparse_error(DType dtype, const void* data, size_t count, const uint32_t* indices,
                  uint64_t seed, size_t kept, bool scaled, float* error) {
  dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    auto x = static_cast<const typename In::Storage*>(data);
    load_all<In>(x, count, error);
    for_each_kept(indices, seed, count, kept, [&](uint64_t, uint64_t index, uint64_t length) {
      float value = In::load(x[index]);
      float decoded = scaled ? stratum_scaled(value, static_cast<float>(length)) : value;
      error[index] = value - decoded;
    });
  });
}

}  // namespace terse
