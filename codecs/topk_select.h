// Which elements a magnitude sparsifier keeps, on the CPU; cuda/sparse_select_kernels.cu does
// the same on the GPU with the same rules, so both keep the same elements.
//
// Exact: the k largest magnitudes (magnitude_key order; ties go to the lower index). A histogram
// of the top 11 key bits gives a threshold at or below the k-th largest key; one vectorised pass
// collects the survivors and the exact top k is taken among them. When ties make the survivors
// too many, two more radix rounds find the k-th key itself and one ordered pass keeps the top k.
//
// Sampled (DGC's approximation): draw a stratified sample of the tensor at fixed counter-RNG
// positions, take as threshold t the sample key of rank r (plan_sample), keep every element with
// key >= t in one vectorised pass. r is chosen two standard deviations above the expected rank,
// so the survivors usually number a little more than k; then the exact top k among them is kept,
// which equals the exact top k of the whole tensor (t is at or below the k-th largest key).
// When fewer than k survive, all survivors are kept: fewer than k elements, every one of them
// among the exact top k. So sampled keeps between 1 and k elements, never one outside the top k.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

class EncodeWorkspace;  // encode_workspace.h

enum class SelectMethod : uint8_t { kExact = 0, kSampled = 1 };

// The sample that the sampled method draws, decided on the host for both CPU and GPU.
struct SamplePlan {
  bool exact = true;     // sampling would not pay (the sample would cover over a quarter of
                         // the tensor, or k most of it): select exactly
  uint64_t samples = 0;  // stratified sample size s: max(count/100, 64 count/k, 1024)
  uint64_t rank = 0;     // threshold = the rank-th largest sample key (1-based)
};

// Sample positions are stratum_pick(kSampleSeed, j, count, samples): fixed, so a top-k message
// depends on the input alone.
constexpr uint64_t kSampleSeed = 0x746f706b73616d70ull;  // "topksamp"

SamplePlan plan_sample(size_t count, size_t k);

// Selects among `count` elements of `dtype` at `data` and writes a sparse payload at `payload`
// (sparse_message.h): the kept indices, increasing, then their values in the storage type of
// `dtype`, copied bit for bit. Room for k of each is needed. Returns how many were kept: k for
// exact, 1..k for sampled (0 when k or count is 0). The temporaries (candidates, keys, sample,
// histograms) go in `workspace` (EncodeContext::workspace), or this thread's when it is null.
size_t select_top_k_host(DType dtype, const void* data, size_t count, size_t k, SelectMethod method,
                         void* payload, EncodeWorkspace* workspace);

// Error feedback fused into the selection: selects among v[i] = In(data[i]) + residual[i]
// (fp32) exactly as select_top_k_host(DType::kFloat32, v, count, k, method, payload) would
// (the values written are v's, fp32), in one pass that reads data and residual and writes
// residual[i] = v[i] - decode[i]: v where not kept, 0 where kept. Sampled: the sample's keys are
// read from data and residual, then one pass compensates, writes v to the residual and collects
// the survivors; exact (or a sample that misled): that pass, then the exact selection over the
// residual (which then holds v). `finite` false when some v is not finite: the residual then
// holds v everywhere and `kept` and the payload mean nothing.
struct CompensatedSelection {
  size_t kept = 0;
  bool finite = true;
};
// `workspace` as for select_top_k_host.
CompensatedSelection select_top_k_compensated_host(DType dtype, const void* data, float* residual,
                                                   size_t count, size_t k, SelectMethod method,
                                                   void* payload, EncodeWorkspace* workspace);

// Writes the indices of the elements whose magnitude_key is >= `min_key`, increasing, to
// `indices` (room for count) and returns how many.
size_t select_at_least_host(DType dtype, const void* data, size_t count, uint32_t min_key,
                            uint32_t* indices);

}  // namespace terse
