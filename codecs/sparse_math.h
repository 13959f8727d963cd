// Math shared by the sparsifiers' CPU loops and CUDA kernels (topk, randomk, threshold, dgc):
// magnitude keys, the radix-select steps, Random-K's strata, and the decode scatter. Keeping it
// in one place is what makes a CPU rank and a GPU rank pick the same elements, bit for bit.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"
#include "common/counter_rng.h"
#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {

// The order in which sparsifiers rank elements: the bits of |x| as an unsigned integer, which
// orders every non-NaN float by magnitude. NaN (any payload) ranks above +infinity, so a NaN in
// a gradient is always sent rather than silently dropped: a diverging run stays visible.
TERSE_HD uint32_t magnitude_key(float value) {
  return float_bits(value) & 0x7fffffffu;
}

// The same key as a signed integer (keys never use bit 31): lets the CPU filter compare with
// AVX2's signed vpcmpgtd.
TERSE_HD int32_t magnitude_key_signed(float value) {
  return static_cast<int32_t>(float_bits(value) & 0x7fffffffu);
}

// Radix select of the k-th largest key in three rounds of 11, 11 and 10 bits (most significant
// first). Each round histograms the keys that share the prefix chosen so far; 2048 counters fit
// in a GPU block's shared memory and in a CPU core's L1.
constexpr int kRadixRounds = 3;
constexpr int kRadixBins = 2048;

TERSE_HD int radix_shift(int round) {
  return round == 0 ? 21 : (round == 1 ? 10 : 0);
}

TERSE_HD uint32_t radix_bin(uint32_t key, int round) {
  return (key >> radix_shift(round)) & (round == 2 ? 0x3ffu : 0x7ffu);
}

// Whether `key` belongs to the group a round histograms: the keys whose bits above this round's
// digit equal `prefix` (every key in round 0).
TERSE_HD bool radix_in_group(uint32_t key, int round, uint32_t prefix) {
  return round == 0 || (key >> radix_shift(round - 1)) == prefix;
}

// Where a radix select stands: the digits chosen so far and how many of the wanted elements are
// still to be found inside that group. After the last round `prefix` is the k-th largest key and
// `remaining` is how many elements equal to it belong to the top k (lower indices first).
struct RadixState {
  uint32_t prefix;
  uint32_t padding;
  uint64_t remaining;
};

// Picks this round's digit from the group's histogram: the highest bin at which the count of
// keys at or above it reaches `remaining`. Requires 1 <= remaining <= the group's size.
TERSE_HD void radix_choose_bin(const uint32_t* histogram, int round, RadixState* state) {
  int bins = round == 2 ? 1024 : kRadixBins;
  uint64_t above = 0;
  int bin = bins - 1;
  for (; bin > 0; --bin) {
    if (above + histogram[bin] >= state->remaining) break;
    above += histogram[bin];
  }
  state->remaining -= above;
  state->prefix =
      (round == 0 ? 0u : state->prefix << (round == 2 ? 10 : 11)) | static_cast<uint32_t>(bin);
}

// Ordered selection against a bound: an element is kept when its key is above `bound.key`, or
// equal to it and among the first `bound.quota` such elements in index order (the lower index
// wins ties, on CPU and GPU alike). A quota of UINT64_MAX keeps every equal key (key >= bound).
struct SelectBound {
  uint32_t key;
  uint32_t padding;
  uint64_t quota;
};

constexpr uint64_t kKeepAllEqual = ~uint64_t{0};

// Random-K's strata: [0, count) split into k near-equal runs, stratum j = [j*count/k,
// (j+1)*count/k). Requires count < 2^32 and k <= count (so the products fit in 64 bits).
TERSE_HD uint64_t stratum_begin(uint64_t j, uint64_t count, uint64_t k) {
  return j * count / k;
}

// One position drawn uniformly from [begin, end) by the counter RNG at (seed, j): begin +
// floor(u * length) with a 32-bit u, so each position has probability 1/length within a
// relative 2^-32 * length.
TERSE_HD uint64_t stratum_pick_in(uint64_t seed, uint64_t j, uint64_t begin, uint64_t end) {
  return begin + (((counter_random(seed, j) >> 32) * (end - begin)) >> 32);
}

// One position drawn uniformly from stratum j.
TERSE_HD uint64_t stratum_pick(uint64_t seed, uint64_t j, uint64_t count, uint64_t k) {
  return stratum_pick_in(seed, j, stratum_begin(j, count, k), stratum_begin(j + 1, count, k));
}

// Walks the strata in order without dividing: begin() is stratum_begin(j, count, k) for the
// j-th stratum visited (j * count = begin * k + remainder, advanced by count each step).
class StratumWalk {
 public:
  TERSE_HD StratumWalk(uint64_t count, uint64_t k)
      : whole_(count / k), part_(count % k), k_(k), begin_(0), remainder_(0) {}
  TERSE_HD uint64_t begin() const { return begin_; }
  TERSE_HD void advance() {
    begin_ += whole_;
    remainder_ += part_;
    if (remainder_ >= k_) {
      remainder_ -= k_;
      ++begin_;
    }
  }

 private:
  uint64_t whole_, part_, k_, begin_, remainder_;
};

// Host loops over the kept elements of a message: calls fn(j, index, stratum length) for
// j = 0..kept-1, index from `indices` or, when null, drawn from the strata with `seed`. Drawn
// indices are computed a batch ahead, so fn's memory accesses do not wait behind the RNG and
// many cache misses stay in flight.
template <typename Fn>
inline void for_each_kept(const uint32_t* indices, uint64_t seed, uint64_t count, uint64_t kept,
                          Fn&& fn) {
  if (kept == 0) return;
  constexpr uint64_t kBatch = 64;
  uint64_t batch_index[kBatch], batch_length[kBatch];
  StratumWalk strata(count, kept);
  for (uint64_t first = 0; first < kept; first += kBatch) {
    const uint64_t size = kept - first < kBatch ? kept - first : kBatch;
    for (uint64_t b = 0; b < size; ++b) {
      uint64_t begin = strata.begin();
      strata.advance();
      uint64_t end = strata.begin();
      batch_length[b] = end - begin;
      batch_index[b] =
          indices != nullptr ? indices[first + b] : stratum_pick_in(seed, first + b, begin, end);
    }
    for (uint64_t b = 0; b < size; ++b) fn(first + b, batch_index[b], batch_length[b]);
  }
}

// A kept value times its stratum length (unbiased Random-K), saturating at the largest float
// rather than overflowing to infinity: a finite gradient never decodes as a non-finite value.
TERSE_HD float stratum_scaled(float value, float length) {
  const float scaled = value * length;
  return scaled > FLT_MAX ? FLT_MAX : (scaled < -FLT_MAX ? -FLT_MAX : scaled);
}

// Writes decoded element `index` = value * scale (stratum_scaled), or adds it when accumulating.
template <typename Wire, typename Out>
TERSE_HD void sparse_scatter_element(const typename Wire::Storage* values, size_t j, uint64_t index,
                                     float scale, bool scaled, typename Out::Storage* output,
                                     bool accumulate) {
  float value = Wire::load(values[j]);
  if (scaled) value = saturate_to<Out>(stratum_scaled(value, scale));
  if (accumulate) value = Out::load(output[index]) + value;
  output[index] = Out::store(value);
}

}  // namespace terse
