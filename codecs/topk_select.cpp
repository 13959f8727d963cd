#include "codecs/topk_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "codecs/encode_workspace.h"
#include "codecs/sparse_math.h"

namespace terse {
namespace {

// The filter compares 16 keys (one 64-byte line of fp32) at a time and only looks at single
// lanes when one passes: at 1% density most blocks are skipped after two vector compares.
constexpr size_t kFilterLanes = 16;
constexpr size_t kFilterOverflow = ~size_t{0};

// GCC/Clang vector extensions: AVX2 in the x86-64-v3 clone, SSE pairs in the default one, NEON
// elsewhere. Plain loops do not vectorise here: GCC turns the "any lane passes" reduction into
// a scalar max chain.
typedef int32_t KeyVector __attribute__((vector_size(32)));
typedef int64_t WordVector __attribute__((vector_size(32)));
constexpr size_t kKeyVectorLanes = sizeof(KeyVector) / sizeof(int32_t);

// Whether any of the 16 keys is >= bound.
inline bool any_at_least(const int32_t* keys, int32_t bound) {
  KeyVector low, high;
  memcpy(&low, keys, sizeof(low));
  memcpy(&high, keys + kKeyVectorLanes, sizeof(high));
  WordVector hits = reinterpret_cast<WordVector>((low >= bound) | (high >= bound));
  return ((hits[0] | hits[1]) | (hits[2] | hits[3])) != 0;
}

// The selection's temporaries, each in its own buffer of the caller's EncodeWorkspace (no
// allocation once warm).
enum WorkspaceBuffer : int {
  kIndexBuffer = 0,  // candidates' indices
  kValueBuffer,      // candidates' values
  kKeyBuffer,        // refine's keys
  kSampleBuffer,     // the sample's positions, then keys
  kHistogramBuffer,  // radix_histogram's interleaved histograms
};
static_assert(kHistogramBuffer < EncodeWorkspace::kBuffers, "a buffer per temporary");

// Survivors of a filter pass: their indices and their elements, so that refining them never
// goes back to the (cache-cold) tensor.
template <typename In>
struct Candidates {
  using Storage = typename In::Storage;
  uint32_t* indices = nullptr;
  Storage* values = nullptr;
  size_t size = 0;

  uint32_t key(size_t j) const { return magnitude_key(In::load(values[j])); }
};

// Candidates with room for `cap` survivors plus a block (the filters' branch-free writes).
template <typename In>
Candidates<In> candidates_with_room(size_t cap, EncodeWorkspace* workspace) {
  Candidates<In> candidates;
  candidates.indices = workspace->array<uint32_t>(kIndexBuffer, cap + kFilterLanes + 1);
  candidates.values = workspace->array<typename In::Storage>(kValueBuffer, cap + kFilterLanes + 1);
  return candidates;
}

// Collects the elements with key >= min_key into `out` (room for `cap`, plus a block); stops
// and returns kFilterOverflow once more than `cap` survive. `out_values` may be null.
template <typename In>
TERSE_CPU_DISPATCH size_t filter_at_least(const typename In::Storage* __restrict__ x, size_t count,
                                          uint32_t min_key, uint32_t* __restrict__ out_indices,
                                          typename In::Storage* __restrict__ out_values,
                                          size_t cap) {
  const int32_t bound = static_cast<int32_t>(min_key);
  size_t kept = 0;
  size_t i = 0;
  alignas(64) int32_t keys[kFilterLanes];
  for (; i + kFilterLanes <= count; i += kFilterLanes) {
    for (size_t lane = 0; lane < kFilterLanes; ++lane) {
      keys[lane] = magnitude_key_signed(In::load(x[i + lane]));
    }
    if (!any_at_least(keys, bound)) continue;
    if (kept > cap) return kFilterOverflow;
    // Branch-free compaction: always write, advance only on a hit.
    for (size_t lane = 0; lane < kFilterLanes; ++lane) {
      out_indices[kept] = static_cast<uint32_t>(i + lane);
      if (out_values != nullptr) out_values[kept] = x[i + lane];
      kept += keys[lane] >= bound;
    }
  }
  for (; i < count; ++i) {
    if (kept > cap) return kFilterOverflow;
    out_indices[kept] = static_cast<uint32_t>(i);
    if (out_values != nullptr) out_values[kept] = x[i];
    kept += magnitude_key_signed(In::load(x[i])) >= bound;
  }
  return kept > cap ? kFilterOverflow : kept;
}

template <typename In>
size_t collect(const typename In::Storage* x, size_t count, uint32_t min_key, size_t cap,
               EncodeWorkspace* workspace, Candidates<In>* candidates) {
  *candidates = candidates_with_room<In>(cap, workspace);
  candidates->size =
      filter_at_least<In>(x, count, min_key, candidates->indices, candidates->values, cap);
  return candidates->size;
}

// Histogram of one radix round over the keys in the group `prefix`. Four interleaved
// histograms keep runs of equal bins from serialising on one counter; `partial` holds them
// (4 kRadixBins counters, zeroed here).
template <typename In>
TERSE_CPU_DISPATCH void radix_histogram(const typename In::Storage* __restrict__ x, size_t count,
                                        int round, uint32_t prefix,
                                        uint32_t* __restrict__ histogram,
                                        uint32_t* __restrict__ partial) {
  std::fill(partial, partial + 4 * kRadixBins, 0u);
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    for (size_t lane = 0; lane < 4; ++lane) {
      uint32_t key = magnitude_key(In::load(x[i + lane]));
      if (radix_in_group(key, round, prefix)) ++partial[lane * kRadixBins + radix_bin(key, round)];
    }
  }
  for (; i < count; ++i) {
    uint32_t key = magnitude_key(In::load(x[i]));
    if (radix_in_group(key, round, prefix)) ++partial[radix_bin(key, round)];
  }
  for (int bin = 0; bin < kRadixBins; ++bin) {
    histogram[bin] = partial[bin] + partial[kRadixBins + bin] + partial[2 * kRadixBins + bin] +
                     partial[3 * kRadixBins + bin];
  }
}

// Payload writer: indices at the start, values right after room for `kept` indices.
template <typename In>
struct PayloadWriter {
  uint32_t* indices;
  typename In::Storage* values;
  PayloadWriter(void* payload, size_t kept)
      : indices(static_cast<uint32_t*>(payload)),
        values(reinterpret_cast<typename In::Storage*>(static_cast<uint32_t*>(payload) + kept)) {}
};

// Keeps, in index order, the elements that `bound` keeps (sparse_math.h); there are exactly
// `kept` of them. Reads the tensor itself.
template <typename In>
void write_ordered(const typename In::Storage* x, size_t count, SelectBound bound, size_t kept,
                   void* payload) {
  PayloadWriter<In> out(payload, kept);
  size_t written = 0;
  uint64_t equal = 0;
  for (size_t i = 0; i < count && written < kept; ++i) {
    uint32_t key = magnitude_key(In::load(x[i]));
    bool take = key > bound.key || (key == bound.key && equal < bound.quota);
    equal += key == bound.key;
    if (take) {
      out.indices[written] = static_cast<uint32_t>(i);
      out.values[written] = x[i];
      ++written;
    }
  }
}

// The same over candidates.
template <typename In>
void write_ordered(const Candidates<In>& candidates, SelectBound bound, size_t kept,
                   void* payload) {
  PayloadWriter<In> out(payload, kept);
  size_t written = 0;
  uint64_t equal = 0;
  for (size_t j = 0; j < candidates.size && written < kept; ++j) {
    uint32_t key = candidates.key(j);
    bool take = key > bound.key || (key == bound.key && equal < bound.quota);
    equal += key == bound.key;
    if (take) {
      out.indices[written] = candidates.indices[j];
      out.values[written] = candidates.values[j];
      ++written;
    }
  }
}

// The exact top k among candidates that hold every key at or above some threshold, k < size:
// which is the exact top k of the tensor when at least k keys pass that threshold.
template <typename In>
size_t refine(const Candidates<In>& candidates, size_t k, void* payload,
              EncodeWorkspace* workspace) {
  uint32_t* keys = workspace->array<uint32_t>(kKeyBuffer, candidates.size);
  for (size_t j = 0; j < candidates.size; ++j) keys[j] = candidates.key(j);
  std::nth_element(keys, keys + (k - 1), keys + candidates.size, std::greater<uint32_t>());
  SelectBound bound{keys[k - 1], 0, 0};
  uint64_t above = 0;
  for (size_t j = 0; j < candidates.size; ++j) above += keys[j] > bound.key;
  bound.quota = k - above;
  write_ordered<In>(candidates, bound, k, payload);
  return k;
}

// Keeps every candidate (fewer than k, or exactly k).
template <typename In>
size_t keep_all(const Candidates<In>& candidates, void* payload) {
  PayloadWriter<In> out(payload, candidates.size);
  memcpy(out.indices, candidates.indices, candidates.size * sizeof(uint32_t));
  memcpy(out.values, candidates.values, candidates.size * sizeof(typename In::Storage));
  return candidates.size;
}

template <typename In>
size_t select_exact(const typename In::Storage* x, size_t count, size_t k, void* payload,
                    EncodeWorkspace* workspace) {
  uint32_t histogram[kRadixBins];
  uint32_t* partial = workspace->array<uint32_t>(kHistogramBuffer, 4 * kRadixBins);
  RadixState state{0, 0, k};
  radix_histogram<In>(x, count, 0, 0, histogram, partial);
  radix_choose_bin(histogram, 0, &state);
  // Every key in the chosen bin or above passes prefix << 21: k - remaining + the bin's count,
  // at least k. Collect them when they are few enough to hold.
  size_t survivors = k - state.remaining + histogram[state.prefix];
  size_t cap = std::max(2 * k + 1024, count / 16);
  if (survivors <= cap) {
    Candidates<In> candidates;
    collect<In>(x, count, state.prefix << radix_shift(0), survivors, workspace, &candidates);
    return survivors == k ? keep_all<In>(candidates, payload)
                          : refine<In>(candidates, k, payload, workspace);
  }
  // Heavy ties: finish the radix select and keep the top k in one ordered pass.
  for (int round = 1; round < kRadixRounds; ++round) {
    radix_histogram<In>(x, count, round, state.prefix, histogram, partial);
    radix_choose_bin(histogram, round, &state);
  }
  write_ordered<In>(x, count, SelectBound{state.prefix, 0, state.remaining}, k, payload);
  return k;
}

// The sampled threshold: the plan.rank-th largest key at the plan's sample positions, key(p)
// giving the key at position p and prefetch(p) asking for its memory early.
template <typename Key, typename Prefetch>
uint32_t sample_threshold(size_t count, const SamplePlan& plan, Key key, Prefetch prefetch,
                          EncodeWorkspace* workspace) {
  uint32_t* sample = workspace->array<uint32_t>(kSampleBuffer, plan.samples);
  // Positions first, then the loads with a prefetch kSampleLookahead positions ahead: each
  // sample is a cache miss, and this keeps many of them in flight.
  StratumWalk strata(count, plan.samples);
  for (size_t j = 0; j < plan.samples; ++j) {
    uint64_t begin = strata.begin();
    strata.advance();
    sample[j] = static_cast<uint32_t>(stratum_pick_in(kSampleSeed, j, begin, strata.begin()));
  }
  constexpr size_t kSampleLookahead = 32;
  for (size_t j = 0; j < plan.samples; ++j) {
    if (j + kSampleLookahead < plan.samples) prefetch(sample[j + kSampleLookahead]);
    sample[j] = key(sample[j]);
  }
  std::nth_element(sample, sample + (plan.rank - 1), sample + plan.samples,
                   std::greater<uint32_t>());
  return sample[plan.rank - 1];
}

template <typename In>
size_t select_sampled(const typename In::Storage* x, size_t count, size_t k, const SamplePlan& plan,
                      void* payload, EncodeWorkspace* workspace) {
  const uint32_t threshold = sample_threshold(
      count, plan, [&](size_t p) { return magnitude_key(In::load(x[p])); },
      [&](size_t p) { __builtin_prefetch(x + p); }, workspace);

  // Room for twice k survivors; more means the sample misled us (heavy ties): go exact, which
  // keeps the same elements that refining would have.
  Candidates<In> candidates;
  size_t survivors =
      collect<In>(x, count, threshold, std::min(count, 2 * k + 1024), workspace, &candidates);
  if (survivors == kFilterOverflow) return select_exact<In>(x, count, k, payload, workspace);
  // The survivors hold every key >= threshold: with k or more, the exact top k is among them.
  return survivors <= k ? keep_all<In>(candidates, payload)
                        : refine<In>(candidates, k, payload, workspace);
}

// ---- Fused error feedback (select_top_k_compensated_host) ----

// Keys at or above this are infinities and NaNs.
constexpr uint32_t kNonFiniteKey = 0x7f800000u;

// residual[i] = v = In(x[i]) + residual[i] over [0, count), collecting the elements whose key is
// >= min_key into out_indices/out_values (v, fp32) as filter_at_least does (room for cap plus a
// block; past cap the pass goes on compensating and returns kFilterOverflow). *largest_key: the
// largest key of v, tracked in the same vectorised loop.
template <typename In>
TERSE_CPU_DISPATCH size_t compensate_and_filter(const typename In::Storage* __restrict__ x,
                                                float* __restrict__ residual, size_t count,
                                                uint32_t min_key,
                                                uint32_t* __restrict__ out_indices,
                                                float* __restrict__ out_values, size_t cap,
                                                uint32_t* largest_key) {
  const int32_t bound = static_cast<int32_t>(min_key);
  const KeyVector magnitude = KeyVector{} + 0x7fffffff;
  size_t kept = 0;
  bool overflow = false;
  KeyVector largest_low{}, largest_high{};
  alignas(64) float values[kFilterLanes];
  alignas(64) int32_t keys[kFilterLanes];
  size_t i = 0;
  for (; i + kFilterLanes <= count; i += kFilterLanes) {
    // Plain fixed-length loops and vector types: GCC keeps this one a few vector instructions
    // per 16 elements (one loop doing it all per lane stayed scalar).
    for (size_t lane = 0; lane < kFilterLanes; ++lane) {
      values[lane] = In::load(x[i + lane]) + residual[i + lane];
    }
    memcpy(residual + i, values, sizeof(values));
    KeyVector low, high;
    memcpy(&low, values, sizeof(low));
    memcpy(&high, values + kKeyVectorLanes, sizeof(high));
    low &= magnitude;
    high &= magnitude;
    largest_low = largest_low > low ? largest_low : low;
    largest_high = largest_high > high ? largest_high : high;
    WordVector hits = reinterpret_cast<WordVector>((low >= bound) | (high >= bound));
    if (((hits[0] | hits[1]) | (hits[2] | hits[3])) == 0) continue;
    if (overflow || kept > cap) {
      overflow = true;
      continue;
    }
    memcpy(keys, &low, sizeof(low));
    memcpy(keys + kKeyVectorLanes, &high, sizeof(high));
    for (size_t lane = 0; lane < kFilterLanes; ++lane) {
      out_indices[kept] = static_cast<uint32_t>(i + lane);
      out_values[kept] = values[lane];
      kept += keys[lane] >= bound;
    }
  }
  int32_t top = 0;
  for (size_t lane = 0; lane < kKeyVectorLanes; ++lane) {
    top = std::max({top, largest_low[lane], largest_high[lane]});
  }
  for (; i < count; ++i) {
    const float v = In::load(x[i]) + residual[i];
    residual[i] = v;
    const int32_t key = magnitude_key_signed(v);
    top = std::max(top, key);
    if (overflow || kept > cap) {
      overflow = overflow || key >= bound;
      continue;
    }
    out_indices[kept] = static_cast<uint32_t>(i);
    out_values[kept] = v;
    kept += key >= bound;
  }
  *largest_key = static_cast<uint32_t>(top);
  return overflow || kept > cap ? kFilterOverflow : kept;
}

// The error of the kept elements: v - v = 0 (v finite).
void zero_kept(const void* payload, size_t kept, float* residual) {
  const uint32_t* indices = static_cast<const uint32_t*>(payload);
  for (size_t j = 0; j < kept; ++j) residual[indices[j]] = 0.0f;
}

template <typename In>
CompensatedSelection select_compensated(const typename In::Storage* x, float* residual,
                                        size_t count, size_t k, const SamplePlan& plan,
                                        void* payload, EncodeWorkspace* workspace) {
  uint32_t threshold = ~0u >> 1;  // exact: collect nothing (keys are below 2^31)
  size_t cap = 0;
  if (!plan.exact) {
    threshold = sample_threshold(
        count, plan, [&](size_t p) { return magnitude_key(In::load(x[p]) + residual[p]); },
        [&](size_t p) {
          __builtin_prefetch(x + p);
          __builtin_prefetch(residual + p);
        },
        workspace);
    cap = std::min(count, 2 * k + 1024);
  }
  Candidates<F32> candidates = candidates_with_room<F32>(cap, workspace);
  uint32_t largest = 0;
  const size_t survivors = compensate_and_filter<In>(
      x, residual, count, threshold, candidates.indices, candidates.values, cap, &largest);
  if (largest >= kNonFiniteKey) return CompensatedSelection{0, false};
  size_t kept = 0;
  if (plan.exact || survivors == kFilterOverflow) {
    // The residual holds v now: select from it as the unfused encode selects from v.
    kept = select_exact<F32>(residual, count, k, payload, workspace);
  } else {
    candidates.size = survivors;
    kept = survivors <= k ? keep_all<F32>(candidates, payload)
                          : refine<F32>(candidates, k, payload, workspace);
  }
  zero_kept(payload, kept, residual);
  return CompensatedSelection{kept, true};
}

// The caller's workspace, or this thread's for a caller that lends none (a per-thread buffer that
// only grows: a thread that encodes again allocates nothing).
EncodeWorkspace* workspace_or_thread(EncodeWorkspace* workspace) {
  if (workspace != nullptr) return workspace;
  thread_local EncodeWorkspace own;
  return &own;
}

}  // namespace

SamplePlan plan_sample(size_t count, size_t k) {
  SamplePlan plan;
  if (count == 0 || k == 0) return plan;
  uint64_t per_k = (64 * static_cast<uint64_t>(count) + k - 1) / k;
  plan.samples = std::max<uint64_t>({count / 100, per_k, 1024});
  if (plan.samples > count / 4) {
    plan.samples = 0;
    return plan;
  }
  // Expected sample rank of the k-th largest key is k s / count, with standard deviation about
  // its square root; two deviations above it makes "at least k survive" likely (~98%).
  double expected = static_cast<double>(k) * static_cast<double>(plan.samples) / count;
  double rank = std::max(1.0, std::ceil(expected + 2.0 * std::sqrt(expected)));
  if (rank >= static_cast<double>(plan.samples)) {
    // k is most of the tensor: no sample quantile sits safely below the k-th key.
    plan.samples = 0;
    return plan;
  }
  plan.exact = false;
  plan.rank = static_cast<uint64_t>(rank);
  return plan;
}

size_t select_top_k_host(DType dtype, const void* data, size_t count, size_t k, SelectMethod method,
                         void* payload, EncodeWorkspace* workspace) {
  if (count == 0 || k == 0) return 0;
  k = std::min(k, count);
  SamplePlan plan = method == SelectMethod::kSampled ? plan_sample(count, k) : SamplePlan{};
  workspace = workspace_or_thread(workspace);
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    auto x = static_cast<const typename In::Storage*>(data);
    return plan.exact ? select_exact<In>(x, count, k, payload, workspace)
                      : select_sampled<In>(x, count, k, plan, payload, workspace);
  });
}

CompensatedSelection select_top_k_compensated_host(DType dtype, const void* data, float* residual,
                                                   size_t count, size_t k, SelectMethod method,
                                                   void* payload, EncodeWorkspace* workspace) {
  k = std::min(k, count);
  SamplePlan plan = method == SelectMethod::kSampled ? plan_sample(count, k) : SamplePlan{};
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    auto x = static_cast<const typename In::Storage*>(data);
    if (k == 0) {
      // Nothing kept: the error is v everywhere.
      uint32_t largest = 0;
      thread_local uint32_t no_index[kFilterLanes + 1];
      thread_local float no_value[kFilterLanes + 1];
      compensate_and_filter<In>(x, residual, count, ~0u >> 1, no_index, no_value, 0, &largest);
      return CompensatedSelection{0, largest < kNonFiniteKey};
    }
    return select_compensated<In>(x, residual, count, k, plan, payload,
                                  workspace_or_thread(workspace));
  });
}

size_t select_at_least_host(DType dtype, const void* data, size_t count, uint32_t min_key,
                            uint32_t* indices) {
  return dispatch_dtype(dtype, [&](auto in) {
    using In = decltype(in);
    // cap = count never overflows, and the branch-free writes stay below index count.
    return filter_at_least<In>(static_cast<const typename In::Storage*>(data), count, min_key,
                               indices, nullptr, count);
  });
}

}  // namespace terse
