#include "codecs/cuda/dgc_kernels.h"
#include "codecs/cuda/sparse_scratch.cuh"
#include "codecs/device_support.h"
#include "codecs/dgc_math.h"

namespace terse {
namespace {

constexpr unsigned kThreads = 256;
// One block reduces one chunk: its first step adds element t and t + kNormChunk/2, which is the
// first level (stride kNormChunk/2) of the tree in dgc_math.h.
constexpr unsigned kTreeThreads = kNormChunk / 2;

// Reduces the tree levels below kTreeThreads in shared memory, in dgc_math.h's order.
__device__ double finish_tree(double* tree) {
  __syncthreads();
  for (unsigned stride = kTreeThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) tree[threadIdx.x] += tree[threadIdx.x + stride];
    __syncthreads();
  }
  return tree[0];
}

template <typename In>
__global__ void square_sums_kernel(const typename In::Storage* x, size_t count, double* sums) {
  __shared__ double tree[kTreeThreads];
  size_t base = blockIdx.x * kNormChunk;
  tree[threadIdx.x] = square_or_zero<In>(x, count, base + threadIdx.x) +
                      square_or_zero<In>(x, count, base + threadIdx.x + kTreeThreads);
  double sum = finish_tree(tree);
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}

__global__ void partial_sums_kernel(const double* partials, size_t count, double* sums) {
  __shared__ double tree[kTreeThreads];
  size_t base = blockIdx.x * kNormChunk;
  tree[threadIdx.x] = value_or_zero(partials, count, base + threadIdx.x) +
                      value_or_zero(partials, count, base + threadIdx.x + kTreeThreads);
  double sum = finish_tree(tree);
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}

template <typename In>
__global__ void update_kernel(const typename In::Storage* x, size_t count,
                              const double* sum_squares, float clip, float momentum, float* u,
                              float* v) {
  const float scale = sum_squares != nullptr ? clip_scale(*sum_squares, clip) : 1.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    dgc_update_element<In>(x, scale, momentum, u, v, i);
  }
}

__global__ void mask_kernel(const uint32_t* indices, size_t kept, float* u, float* v) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < kept;
       j += size_t(gridDim.x) * blockDim.x) {
    u[indices[j]] = 0.0f;
    v[indices[j]] = 0.0f;
  }
}

size_t chunks(size_t items) {
  return (items + kNormChunk - 1) / kNormChunk;
}

// The sum of squares of the input, left in the returned device double (in `scratch`).
template <typename In>
ncclResult_t sum_squares(const typename In::Storage* x, size_t count, SparseScratch* scratch,
                         size_t first, size_t second, cudaStream_t stream, double** result) {
  double* sums = scratch->at<double>(first);
  double* other = scratch->at<double>(second);
  size_t items = chunks(count);
  square_sums_kernel<In><<<items, kTreeThreads, 0, stream>>>(x, count, sums);
  TERSE_CHECK(check_launch("dgc: clipping norm"));
  while (items > 1) {
    size_t next = chunks(items);
    partial_sums_kernel<<<next, kTreeThreads, 0, stream>>>(sums, items, other);
    TERSE_CHECK(check_launch("dgc: clipping norm"));
    std::swap(sums, other);
    items = next;
  }
  *result = sums;
  return ncclSuccess;
}

}  // namespace

ncclResult_t launch_dgc_update(DType dtype, const void* input, size_t count, float clip,
                               float momentum, float* u, float* v, void* stream) {
  if (count == 0) return ncclSuccess;
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  SparseScratch scratch(cuda_stream);
  size_t first = 0, second = 0;
  if (clip > 0.0f) {
    first = scratch.reserve(chunks(count) * sizeof(double));
    second = scratch.reserve(chunks(chunks(count)) * sizeof(double));
  }
  TERSE_CHECK(scratch.allocate("dgc: scratch"));
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    auto x = static_cast<const typename In::Storage*>(input);
    double* sum = nullptr;
    if (clip > 0.0f)
      TERSE_CHECK(sum_squares<In>(x, count, &scratch, first, second, cuda_stream, &sum));
    update_kernel<In><<<grid_for(count, kThreads), kThreads, 0, cuda_stream>>>(x, count, sum, clip,
                                                                               momentum, u, v);
    return check_launch("dgc: update");
  });
}

ncclResult_t launch_dgc_mask(const uint32_t* indices, size_t kept, float* u, float* v,
                             void* stream) {
  if (kept == 0) return ncclSuccess;
  mask_kernel<<<grid_for(kept, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      indices, kept, u, v);
  return check_launch("dgc: mask");
}

}  // namespace terse
