// The residual-admission scenario, through libterse's public API only (<nccl.h>, <terse/terse.h>):
// three 4 MiB fp32 tensors, each reduced by name once per step with codec sign, under a
// TERSE_MEMORY_MAX_BYTES with room for the error-feedback memory of two of them. The first two
// are admitted and keep error feedback (the running sum of their results trails the running sum
// of the inputs by the residuals only); the third is not admitted and is reduced exactly
// (uncompressed) on every rank, with one WARN. A memory that evicted an active tensor for
// another would thrash: all three would lose their residuals every step, and sign's bias would
// pile up in the running sums (about 45% off after 30 steps here, against 5% with memory).
//
// Shared by the threads test (test_residual_admission.cpp) and plugin_rank_process (the
// "residual-admission" scenario, test_plugin_processes.cpp), so both check the same thing.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_rank_protocol.h"

namespace plugin_test {

constexpr int kAdmissionTensors = 3;
constexpr size_t kAdmissionCount = size_t{1} << 20;  // 4 MiB of fp32: sign runs through sra
constexpr int kAdmissionSteps = 30;
// On 4 ranks each tensor's entry holds its residual (4 MiB) and the scatter-reduce-allgather
// owner residual of the largest chunk (1 MiB): 10 MiB is room for two, not three.
constexpr const char* kAdmissionCap = "10M";
constexpr uint64_t kAdmissionCapBytes = uint64_t{10} << 20;
constexpr int kAdmissionRanks = 4;
// Where the running sums of the admitted tensors may be, relative to the inputs' (measured:
// 0.05 with error feedback, 0.45 without).
constexpr double kAdmittedDriftLimit = 0.10;

inline const char* admission_tensor_name(int tensor) {
  static const char* const kNames[kAdmissionTensors] = {"layer0.weight", "layer1.weight",
                                                        "layer2.weight"};
  return kNames[tensor];
}

inline uint64_t admission_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s gradient of `tensor` at `step`: a direction that persists over the steps (what
// training follows) plus noise of twice its spread, in multiples of 2^-10 below 0.75 in
// magnitude, so that every sum over ranks is exact in fp32 in any order: an uncompressed
// allreduce must return exactly the float64 sum.
inline float admission_input(int rank, int tensor, int step, size_t i) {
  const uint64_t element = static_cast<uint64_t>(i);
  const int64_t direction =
      static_cast<int64_t>(admission_mix((uint64_t(tensor) << 48) ^ element) % 513) - 256;
  const uint64_t who = (uint64_t(rank) << 8 | uint64_t(tensor)) << 40 | uint64_t(step) << 24;
  const int64_t noise = static_cast<int64_t>(admission_mix(who ^ element) % 1025) - 512;
  return static_cast<float>(direction + noise) / 1024.0f;
}

struct AdmissionOutcome {
  // ||sum over steps of results - sum over steps of exact sums|| / ||the latter||, per tensor,
  // after the last step.
  double drift[kAdmissionTensors] = {};
  // Whether the tensor's result equalled the exact sum, bit for bit, at every step.
  bool exact[kAdmissionTensors] = {true, true, true};
  terseStats stats{};  // after the last step
  std::string error;   // the first call that failed, when one did
};

// `steps` steps of the three tensors on this rank of `nranks`, each call's result compared with
// the exact sum of every rank's input.
inline AdmissionOutcome run_admission_steps(ncclComm_t comm, int rank, int nranks, int steps) {
  AdmissionOutcome outcome;
  const size_t n = kAdmissionCount;
  std::vector<float> send(n), recv(n);
  std::vector<double> exact(n);
  std::vector<std::vector<double>> results_sum(kAdmissionTensors, std::vector<double>(n, 0.0));
  std::vector<std::vector<double>> exact_sum(kAdmissionTensors, std::vector<double>(n, 0.0));
  for (int step = 0; step < steps; ++step) {
    for (int tensor = 0; tensor < kAdmissionTensors; ++tensor) {
      for (size_t i = 0; i < n; ++i) send[i] = admission_input(rank, tensor, step, i);
      terseTensor description{};
      description.name = admission_tensor_name(tensor);
      if (terseAllReduceTensor(send.data(), recv.data(), n, ncclFloat32, ncclSum, &description,
                               comm, nullptr) != ncclSuccess) {
        outcome.error = std::string(description.name) + " at step " + std::to_string(step) + ": " +
                        ncclGetLastError(comm);
        return outcome;
      }
      std::fill(exact.begin(), exact.end(), 0.0);
      for (int r = 0; r < nranks; ++r) {
        for (size_t i = 0; i < n; ++i) exact[i] += admission_input(r, tensor, step, i);
      }
      std::vector<double>& results = results_sum[static_cast<size_t>(tensor)];
      std::vector<double>& exacts = exact_sum[static_cast<size_t>(tensor)];
      for (size_t i = 0; i < n; ++i) {
        if (static_cast<double>(recv[i]) != exact[i]) outcome.exact[tensor] = false;
        results[i] += recv[i];
        exacts[i] += exact[i];
      }
    }
  }
  for (int tensor = 0; tensor < kAdmissionTensors; ++tensor) {
    double gap = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      const double expected = exact_sum[static_cast<size_t>(tensor)][i];
      const double d = results_sum[static_cast<size_t>(tensor)][i] - expected;
      gap += d * d;
      norm += expected * expected;
    }
    outcome.drift[tensor] = norm > 0 ? std::sqrt(gap / norm) : 0.0;
  }
  if (terseCommGetStats(comm, &outcome.stats) != ncclSuccess) {
    outcome.error = std::string("terseCommGetStats: ") + ncclGetLastError(comm);
  }
  return outcome;
}

// Formats the figures every rank must share, for comparison across ranks.
inline std::string admission_counters(const terseStats& stats) {
  return "admitted " + std::to_string(stats.residual_admitted) + ", refused " +
         std::to_string(stats.residual_refused) + ", fallback calls " +
         std::to_string(stats.fallback_calls) + ", evictions " +
         std::to_string(stats.residual_evictions) + ", entries " +
         std::to_string(stats.residual_entries) + ", bytes " +
         std::to_string(stats.residual_bytes) + ", step " + std::to_string(stats.residual_step) +
         ", compressed calls " + std::to_string(stats.compressed_calls);
}

// The scenario as plugin_rank_process runs it: an exit code of plugin_rank_protocol.h, what was
// wrong on stderr, and "admission counters: ..." on stdout.
inline int run_residual_admission(ncclComm_t comm, int rank, int nranks) {
  const AdmissionOutcome outcome = run_admission_steps(comm, rank, nranks, kAdmissionSteps);
  std::string wrong = outcome.error;
  const terseStats& stats = outcome.stats;
  char drift[160];
  snprintf(drift, sizeof(drift), "drift %.4f %.4f %.4f", outcome.drift[0], outcome.drift[1],
           outcome.drift[2]);
  if (wrong.empty()) {
    if (!(outcome.drift[0] < kAdmittedDriftLimit && outcome.drift[1] < kAdmittedDriftLimit)) {
      wrong = std::string("the admitted tensors drifted: ") + drift;
    } else if (!outcome.exact[2]) {
      wrong = std::string("the tensor without memory was not reduced exactly: ") + drift;
    } else if (stats.residual_admitted != 2 || stats.residual_refused != 1 ||
               stats.fallback_calls != uint64_t{kAdmissionSteps} || stats.residual_evictions != 0) {
      wrong = "counters: " + admission_counters(stats);
    }
  }
  if (!wrong.empty()) {
    fprintf(stderr, "plugin_rank_process rank %d: %s\n", rank, wrong.c_str());
    return kPluginRankWrongResult;
  }
  printf("admission counters: %s\n", admission_counters(stats).c_str());
  printf("admission %s\n", drift);
  fflush(stdout);
  return kPluginRankOk;
}

}  // namespace plugin_test
