#include "compressed/compressed_mutation.h"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "codecs/dtype.h"
#include "collectives/compressed/execution_backend.h"
#include "common/result.h"

namespace terse {
namespace {

std::atomic<int> g_mutation{0};

struct Named {
  CompressedMutation mutation;
  const char* name;
};
constexpr Named kNames[] = {{CompressedMutation::kNone, "none"},
                            {CompressedMutation::kZeroResult, "zero_result"},
                            {CompressedMutation::kDropContribution, "drop_contribution"},
                            {CompressedMutation::kDoubleContribution, "double_contribution"},
                            {CompressedMutation::kSkipResidualUpdate, "skip_residual_update"},
                            {CompressedMutation::kStaleResidual, "stale_residual"}};

// The residual each entry held before its previous call (kStaleResidual).
std::mutex g_stale_mutex;
std::map<const ResidualEntry*, std::vector<float>> g_stale;

std::vector<float> residual_copy(const CompressedArgs& args) {
  const float* residual = args.entry->residual();
  return std::vector<float>(residual, residual + args.entry->key().count);
}

}  // namespace

void set_compressed_mutation(CompressedMutation mutation) {
  g_mutation.store(static_cast<int>(mutation));
  std::lock_guard<std::mutex> lock(g_stale_mutex);
  g_stale.clear();
}

CompressedMutation compressed_mutation() {
  return static_cast<CompressedMutation>(g_mutation.load(std::memory_order_relaxed));
}

const char* compressed_mutation_name(CompressedMutation mutation) {
  for (const Named& named : kNames) {
    if (named.mutation == mutation) return named.name;
  }
  return "unknown";
}

ncclResult_t run_compressed_algorithm(const CompressedAlgorithmInfo& algorithm,
                                      const CompressedArgs& args,
                                      const CompressedContext& context) {
  const CompressedMutation mutation = compressed_mutation();
  // The mutations below touch the buffers from the host.
  if (backend_of(context).memory() != Memory::kHost && mutation != CompressedMutation::kNone) {
    return fail(ncclInvalidUsage, "mutation %s is applied to host buffers only",
                compressed_mutation_name(mutation));
  }
  if (mutation == CompressedMutation::kNone) return algorithm.run(args, context);
  CompressedArgs mutated = args;
  const bool has_residual = args.entry != nullptr && args.entry->residual() != nullptr;
  std::vector<uint8_t> input;
  if ((mutation == CompressedMutation::kDropContribution ||
       mutation == CompressedMutation::kDoubleContribution) &&
      context.group.index == 1) {
    input.assign(args.count * dtype_size(args.dtype), 0);
    if (mutation == CompressedMutation::kDoubleContribution) {
      for (size_t i = 0; i < args.count; ++i) {
        store_element(input.data(), args.dtype, i, 2.0f * load_element(args.send, args.dtype, i));
      }
    }
    mutated.send = input.data();
  }
  std::vector<float> before;
  if (has_residual && (mutation == CompressedMutation::kSkipResidualUpdate ||
                       mutation == CompressedMutation::kStaleResidual)) {
    before = residual_copy(args);
  }
  if (has_residual && mutation == CompressedMutation::kStaleResidual) {
    std::lock_guard<std::mutex> lock(g_stale_mutex);
    auto stale = g_stale.find(args.entry);
    if (stale != g_stale.end() && stale->second.size() == before.size()) {
      std::memcpy(args.entry->residual(), stale->second.data(), before.size() * sizeof(float));
    } else {
      std::memset(args.entry->residual(), 0, before.size() * sizeof(float));
    }
  }
  const ncclResult_t result = algorithm.run(mutated, context);
  if (result != ncclSuccess) return result;
  if (mutation == CompressedMutation::kZeroResult) {
    std::memset(args.recv, 0, args.count * dtype_size(args.dtype));
  }
  if (has_residual && mutation == CompressedMutation::kSkipResidualUpdate) {
    std::memcpy(args.entry->residual(), before.data(), before.size() * sizeof(float));
  }
  if (has_residual && mutation == CompressedMutation::kStaleResidual) {
    std::lock_guard<std::mutex> lock(g_stale_mutex);
    g_stale[args.entry] = std::move(before);
  }
  return ncclSuccess;
}

}  // namespace terse
