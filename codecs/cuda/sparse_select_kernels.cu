// GPU selection for the magnitude sparsifiers: the rules of topk_select.h with GPU-shaped steps.
//
//  - exact: three radix rounds (shared-memory histograms of 11, 11 and 10 key bits, a one-thread
//    pick of the digit, sparse_math.h) give the k-th largest key T and how many keys equal to T
//    to keep; then an ordered compaction keeps key > T and the first `quota` keys == T.
//  - sampled: the sample of plan_sample at the same counter-RNG positions, sorted descending
//    with CUB, gives the threshold t (the rank-th largest); a counting pass finds how many keys
//    are >= t. With k or more, the exact top k is kept (the CPU refines its survivors to the same
//    set); with fewer, every survivor is kept.
//  - ordered compaction: per 2048-element tile, count the keys above the bound and equal to it
//    (packed in one uint64), an exclusive scan over tiles (CUB), then each tile writes its kept
//    indices at their global rank, in index order, with a block scan per 256-element round.
#include <cub/cub.cuh>

#include <algorithm>

#include "codecs/cuda/sparse_scratch.cuh"
#include "codecs/cuda/sparse_select_kernels.h"
#include "codecs/device_support.h"
#include "codecs/sparse_math.h"

namespace terse {
namespace {

constexpr int kThreads = 256;
constexpr int kRounds = 8;  // rounds of kThreads elements per tile
constexpr size_t kTile = size_t(kThreads) * kRounds;
constexpr uint64_t kAboveOne = uint64_t{1} << 32;  // "one key above" in a packed count

template <typename In>
__device__ uint32_t key_at(const typename In::Storage* x, size_t i) {
  return magnitude_key(In::load(x[i]));
}

// Packed count of one key against the bound: above in the high word, equal in the low word.
__device__ uint64_t classify(uint32_t key, uint32_t bound) {
  return key > bound ? kAboveOne : (key == bound ? 1u : 0u);
}

__global__ void init_radix_kernel(RadixState* state, uint64_t k) {
  state->prefix = 0;
  state->remaining = k;
}

template <typename In>
__global__ void radix_histogram_kernel(const typename In::Storage* x, size_t count, int round,
                                       const RadixState* state, uint32_t* histogram) {
  __shared__ uint32_t local[kRadixBins];
  for (int bin = threadIdx.x; bin < kRadixBins; bin += blockDim.x) local[bin] = 0;
  __syncthreads();
  const uint32_t prefix = state->prefix;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t key = key_at<In>(x, i);
    if (radix_in_group(key, round, prefix)) atomicAdd(&local[radix_bin(key, round)], 1u);
  }
  __syncthreads();
  for (int bin = threadIdx.x; bin < kRadixBins; bin += blockDim.x) {
    if (local[bin] != 0) atomicAdd(&histogram[bin], local[bin]);
  }
}

__global__ void radix_choose_kernel(const uint32_t* histogram, int round, RadixState* state) {
  radix_choose_bin(histogram, round, state);
}

__global__ void bound_from_radix_kernel(const RadixState* state, SelectBound* bound) {
  bound->key = state->prefix;
  bound->quota = state->remaining;
}

// The threshold of the sampled method: the rank-th largest of the sorted sample.
__global__ void bound_from_sample_kernel(const uint32_t* sorted_sample, uint64_t rank,
                                         SelectBound* bound) {
  bound->key = sorted_sample[rank - 1];
  bound->quota = kKeepAllEqual;
}

__global__ void set_bound_kernel(uint32_t key, uint64_t quota, SelectBound* bound) {
  bound->key = key;
  bound->quota = quota;
}

template <typename In>
__global__ void sample_kernel(const typename In::Storage* x, size_t count, uint64_t samples,
                              uint32_t* keys) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < samples;
       j += size_t(gridDim.x) * blockDim.x) {
    keys[j] = key_at<In>(x, stratum_pick(kSampleSeed, j, count, samples));
  }
}

template <typename In>
__global__ void count_tiles_kernel(const typename In::Storage* x, size_t count,
                                   const SelectBound* bound, uint64_t* tile_counts) {
  using BlockReduce = cub::BlockReduce<uint64_t, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const uint32_t bound_key = bound->key;
  const size_t base = blockIdx.x * kTile;
  uint64_t packed = 0;
  for (int round = 0; round < kRounds; ++round) {
    size_t i = base + size_t(round) * kThreads + threadIdx.x;
    if (i < count) packed += classify(key_at<In>(x, i), bound_key);
  }
  uint64_t total = BlockReduce(temp).Sum(packed);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// kept = above + min(equal, quota) over the whole tensor, from the scanned tile counts.
__global__ void total_kernel(const uint64_t* tile_offsets, const uint64_t* tile_counts,
                             size_t tiles, const SelectBound* bound, uint64_t* kept) {
  uint64_t packed = tile_offsets[tiles - 1] + tile_counts[tiles - 1];
  uint64_t above = packed >> 32, equal = packed & 0xffffffffu;
  *kept = above + (equal < bound->quota ? equal : bound->quota);
}

template <typename In>
__global__ void write_tiles_kernel(const typename In::Storage* x, size_t count,
                                   const SelectBound* bound, const uint64_t* tile_offsets,
                                   uint32_t* indices) {
  using BlockScan = cub::BlockScan<uint64_t, kThreads>;
  __shared__ typename BlockScan::TempStorage temp;
  const uint32_t bound_key = bound->key;
  const uint64_t quota = bound->quota;
  const size_t base = blockIdx.x * kTile;
  uint64_t before = tile_offsets[blockIdx.x];  // packed counts of all earlier elements
  for (int round = 0; round < kRounds; ++round) {
    size_t i = base + size_t(round) * kThreads + threadIdx.x;
    uint32_t key = 0;
    uint64_t mine = 0;
    if (i < count) {
      key = key_at<In>(x, i);
      mine = classify(key, bound_key);
    }
    uint64_t exclusive = 0, round_total = 0;
    BlockScan(temp).ExclusiveSum(mine, exclusive, round_total);
    __syncthreads();  // temp is reused by the next round's scan
    uint64_t packed = before + exclusive;
    uint64_t above = packed >> 32, equal = packed & 0xffffffffu;
    if (mine == kAboveOne || (mine == 1 && equal < quota)) {
      indices[above + (equal < quota ? equal : quota)] = static_cast<uint32_t>(i);
    }
    before += round_total;
  }
}

// The tile counts, their scan and the total of one ordered compaction.
class Compaction {
 public:
  Compaction(size_t count, SparseScratch* scratch) : tiles_((count + kTile - 1) / kTile) {
    counts_ = scratch->reserve(tiles_ * sizeof(uint64_t));
    offsets_ = scratch->reserve(tiles_ * sizeof(uint64_t));
    total_ = scratch->reserve(sizeof(uint64_t));
    cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes_, static_cast<uint64_t*>(nullptr),
                                  static_cast<uint64_t*>(nullptr), tiles_);
    scan_temp_ = scratch->reserve(scan_bytes_);
    scratch_ = scratch;
  }

  // How many elements `bound` keeps (synchronises the stream to read it).
  template <typename In>
  ncclResult_t count_kept(const typename In::Storage* x, size_t count, const SelectBound* bound,
                          cudaStream_t stream, size_t* kept) {
    uint64_t* counts = scratch_->at<uint64_t>(counts_);
    uint64_t* offsets = scratch_->at<uint64_t>(offsets_);
    count_tiles_kernel<In><<<tiles_, kThreads, 0, stream>>>(x, count, bound, counts);
    TERSE_CHECK(check_launch("sparse select: count"));
    size_t scan_bytes = scan_bytes_;
    TERSE_SPARSE_CUDA(cub::DeviceScan::ExclusiveSum(scratch_->at<void>(scan_temp_), scan_bytes,
                                                    counts, offsets, tiles_, stream),
                      "sparse select: scan");
    total_kernel<<<1, 1, 0, stream>>>(offsets, counts, tiles_, bound,
                                      scratch_->at<uint64_t>(total_));
    TERSE_CHECK(check_launch("sparse select: total"));
    uint64_t total = 0;
    TERSE_SPARSE_CUDA(cudaMemcpyAsync(&total, scratch_->at<uint64_t>(total_), sizeof(total),
                                      cudaMemcpyDeviceToHost, stream),
                      "sparse select: reading the count");
    TERSE_SPARSE_CUDA(cudaStreamSynchronize(stream), "sparse select: reading the count");
    *kept = static_cast<size_t>(total);
    return ncclSuccess;
  }

  // Writes the kept indices; count_kept() with the same bound must have run just before.
  template <typename In>
  ncclResult_t write_kept(const typename In::Storage* x, size_t count, const SelectBound* bound,
                          uint32_t* indices, cudaStream_t stream) {
    write_tiles_kernel<In><<<tiles_, kThreads, 0, stream>>>(
        x, count, bound, scratch_->at<uint64_t>(offsets_), indices);
    return check_launch("sparse select: write");
  }

 private:
  size_t tiles_;
  size_t counts_ = 0, offsets_ = 0, total_ = 0, scan_temp_ = 0, scan_bytes_ = 0;
  SparseScratch* scratch_ = nullptr;
};

// The exact top-k bound by three radix rounds, left in *bound on the device.
template <typename In>
ncclResult_t radix_select(const typename In::Storage* x, size_t count, size_t k,
                          uint32_t* histogram, RadixState* state, SelectBound* bound,
                          cudaStream_t stream) {
  init_radix_kernel<<<1, 1, 0, stream>>>(state, k);
  for (int round = 0; round < kRadixRounds; ++round) {
    TERSE_SPARSE_CUDA(cudaMemsetAsync(histogram, 0, kRadixBins * sizeof(uint32_t), stream),
                      "sparse select: clearing a histogram");
    radix_histogram_kernel<In>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(x, count, round, state, histogram);
    radix_choose_kernel<<<1, 1, 0, stream>>>(histogram, round, state);
  }
  bound_from_radix_kernel<<<1, 1, 0, stream>>>(state, bound);
  return check_launch("sparse select: radix select");
}

template <typename In>
ncclResult_t select_top_k(const typename In::Storage* x, size_t count, size_t k,
                          const SamplePlan& plan, uint32_t* indices, size_t* kept,
                          cudaStream_t stream) {
  SparseScratch scratch(stream);
  Compaction compaction(count, &scratch);
  const size_t histogram = scratch.reserve(kRadixBins * sizeof(uint32_t));
  const size_t state = scratch.reserve(sizeof(RadixState));
  const size_t bound_at = scratch.reserve(sizeof(SelectBound));
  size_t sample_in = 0, sample_out = 0, sort_temp = 0, sort_bytes = 0;
  if (!plan.exact) {
    sample_in = scratch.reserve(plan.samples * sizeof(uint32_t));
    sample_out = scratch.reserve(plan.samples * sizeof(uint32_t));
    cub::DeviceRadixSort::SortKeysDescending(nullptr, sort_bytes, static_cast<uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), plan.samples);
    sort_temp = scratch.reserve(sort_bytes);
  }
  TERSE_CHECK(scratch.allocate("topk select: scratch"));
  SelectBound* bound = scratch.at<SelectBound>(bound_at);

  if (!plan.exact) {
    uint32_t* keys = scratch.at<uint32_t>(sample_in);
    uint32_t* sorted = scratch.at<uint32_t>(sample_out);
    sample_kernel<In>
        <<<grid_for(plan.samples, kThreads), kThreads, 0, stream>>>(x, count, plan.samples, keys);
    TERSE_CHECK(check_launch("topk select: sample"));
    TERSE_SPARSE_CUDA(
        cub::DeviceRadixSort::SortKeysDescending(scratch.at<void>(sort_temp), sort_bytes, keys,
                                                 sorted, plan.samples, 0, 32, stream),
        "topk select: sorting the sample");
    bound_from_sample_kernel<<<1, 1, 0, stream>>>(sorted, plan.rank, bound);
    size_t survivors = 0;
    TERSE_CHECK(compaction.count_kept<In>(x, count, bound, stream, &survivors));
    if (survivors <= k) {
      *kept = survivors;
      return compaction.write_kept<In>(x, count, bound, indices, stream);
    }
    // k or more survive: the exact top k is among them, so select it exactly.
  }
  TERSE_CHECK(radix_select<In>(x, count, k, scratch.at<uint32_t>(histogram),
                               scratch.at<RadixState>(state), bound, stream));
  TERSE_CHECK(compaction.count_kept<In>(x, count, bound, stream, kept));
  return compaction.write_kept<In>(x, count, bound, indices, stream);
}

template <typename In>
ncclResult_t select_at_least(const typename In::Storage* x, size_t count, uint32_t min_key,
                             uint32_t* indices, size_t* kept, cudaStream_t stream) {
  SparseScratch scratch(stream);
  Compaction compaction(count, &scratch);
  const size_t bound_at = scratch.reserve(sizeof(SelectBound));
  TERSE_CHECK(scratch.allocate("threshold select: scratch"));
  SelectBound* bound = scratch.at<SelectBound>(bound_at);
  set_bound_kernel<<<1, 1, 0, stream>>>(min_key, kKeepAllEqual, bound);
  TERSE_CHECK(compaction.count_kept<In>(x, count, bound, stream, kept));
  return compaction.write_kept<In>(x, count, bound, indices, stream);
}

}  // namespace

ncclResult_t launch_select_top_k(DType dtype, const void* data, size_t count, size_t k,
                                 const SamplePlan& plan, uint32_t* indices, size_t* kept,
                                 void* stream) {
  *kept = 0;
  if (count == 0 || k == 0) return ncclSuccess;
  k = std::min(k, count);
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    return select_top_k<In>(static_cast<const typename In::Storage*>(data), count, k, plan, indices,
                            kept, static_cast<cudaStream_t>(stream));
  });
}

ncclResult_t launch_select_at_least(DType dtype, const void* data, size_t count, uint32_t min_key,
                                    uint32_t* indices, size_t* kept, void* stream) {
  *kept = 0;
  if (count == 0) return ncclSuccess;
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    return select_at_least<In>(static_cast<const typename In::Storage*>(data), count, min_key,
                               indices, kept, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace terse
