// The "compressed" scenario of plugin_rank_process: compressed allreduces through libterse's
// public API only (<nccl.h> and <terse/terse.h>), each rank checking its own results against
// the float64 sum within the stated bound (terse.h: terseCodecErrorBound and
// terseAlgorithmLossySteps for the algorithm the statistics name). With ranks grouped into nodes
// (TERSE_HOSTID, set per rank by plugin_rank_process), the hierarchical result is compared with a
// flat communicator's, and the policy's choices by name, size and link class are checked
// through terseCommDecide.
#include <nccl.h>
#include <terse/terse.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_rank_protocol.h"

namespace plugin_test {
namespace {

int fail_with(int rank, const std::string& what) {
  fprintf(stderr, "plugin_rank_process rank %d: %s\n", rank, what.c_str());
  return kPluginRankWrongResult;
}

float input_value(int rank, size_t i) {
  return static_cast<float>(std::sin(0.37 * double(i) + rank) * (1.0 + rank % 3));
}

// The ratio of a Top-K codec spec ("topk:method=...,ratio=0.05"); 0 when it names none.
double top_k_ratio(const std::string& spec) {
  const size_t at = spec.find("ratio=");
  return at == std::string::npos ? 0 : std::atof(spec.c_str() + at + 6);
}

// Every element of `result` is the sum over some subset of ranks of their inputs there (times
// `scale`), and at least half of k = ratio * count elements are non-zero (sampled selection
// keeps about k, never none).
int check_top_k(int rank, int nranks, size_t count, double scale, const std::string& spec,
                const std::vector<float>& result) {
  const double ratio = top_k_ratio(spec);
  if (ratio <= 0) return fail_with(rank, "no ratio in the codec spec " + spec);
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (result[i] == 0.0f) continue;
    ++kept;
    double magnitude = 0;
    for (int r = 0; r < nranks; ++r) magnitude += std::fabs(input_value(r, i));
    bool subset_sum = false;
    for (unsigned subset = 1; subset < (1u << nranks) && !subset_sum; ++subset) {
      double sum = 0;
      for (int r = 0; r < nranks; ++r) {
        if (subset & (1u << r)) sum += input_value(r, i);
      }
      subset_sum = std::fabs(result[i] - sum * scale) <= 1e-5 * magnitude * scale;
    }
    if (!subset_sum) {
      return fail_with(rank, "top-k element " + std::to_string(i) + " = " +
                                 std::to_string(result[i]) + " is no sum of the ranks' values");
    }
  }
  const double k = ratio * static_cast<double>(count);
  if (static_cast<double>(kept) < 0.5 * k) {
    return fail_with(rank, "top-k kept " + std::to_string(kept) + " elements of " +
                               std::to_string(count) + ", k = " + std::to_string(k));
  }
  return kPluginRankOk;
}

// One allreduce of `count` fp32 values (sum, or avg), checked within the bound. `result` gets
// the output; `bound` the bound it was held to.
int checked_allreduce(ncclComm_t comm, int rank, int nranks, size_t count, ncclRedOp_t op,
                      std::vector<float>* result, double* bound, std::string* algorithm) {
  std::vector<float> send(count);
  for (size_t i = 0; i < count; ++i) send[i] = input_value(rank, i);
  result->assign(count, 0.0f);
  terseStats before{}, after{};
  if (terseCommGetStats(comm, &before) != ncclSuccess ||
      ncclAllReduce(send.data(), result->data(), count, ncclFloat32, op, comm, nullptr) !=
          ncclSuccess ||
      terseCommGetStats(comm, &after) != ncclSuccess) {
    return fail_with(rank, std::string("allreduce: ") + ncclGetLastError(comm));
  }
  if (nranks > 1 && after.compressed_calls != before.compressed_calls + 1) {
    return fail_with(
        rank, "the allreduce was not compressed (TERSE_CODEC is " +
                  std::string(getenv("TERSE_CODEC") ? getenv("TERSE_CODEC") : "unset") + ")");
  }
  *algorithm = after.last_algorithm;
  double factor = 0;
  terseNorm_t norm_kind = terseNormMax;
  int steps = 0;
  if (terseCodecErrorBound(after.last_codec, count, &factor, &norm_kind) != ncclSuccess ||
      terseAlgorithmLossySteps(after.last_algorithm, nranks, &steps) != ncclSuccess) {
    return fail_with(rank, std::string("bound: ") + ncclGetLastError(nullptr));
  }
  std::vector<double> exact(count, 0.0);
  double norm_sum = 0;
  for (int r = 0; r < nranks; ++r) {
    double norm = 0;
    for (size_t i = 0; i < count; ++i) {
      const double v = input_value(r, i);
      exact[i] += v;
      norm = norm_kind == terseNormL2 ? norm + v * v : std::fmax(norm, std::fabs(v));
    }
    norm_sum += norm_kind == terseNormL2 ? std::sqrt(norm) : norm;
  }
  const double scale = op == ncclAvg ? 1.0 / nranks : 1.0;
  // S_sum ((1 + c)^k - 1), plus fp32 arithmetic (allreduce_error_bound in the library).
  const double grown = std::pow(1.0 + factor, steps);
  *bound = (norm_sum * (grown - 1.0) + 64 * std::ldexp(1.0, -24) * norm_sum * grown) * scale;
  for (size_t i = 0; i < count; ++i) {
    const double error = std::fabs((*result)[i] - exact[i] * scale);
    if (!(error <= *bound)) {
      return fail_with(rank, "element " + std::to_string(i) + " off by " + std::to_string(error) +
                                 " > bound " + std::to_string(*bound) + " (" + after.last_codec +
                                 ", " + after.last_algorithm + ")");
    }
  }
  // Top-K's stated bound is loose (an all-zero result is within it), so its result is also
  // checked for what Top-K must return on a tensor's first call (no residual yet): each element
  // is the sum of the values some ranks selected there (a subset sum of the inputs; through node
  // leaders, of whole nodes), and about k = ratio * count elements are kept at least.
  if (std::strncmp(after.last_codec, "topk:", 5) == 0) {
    return check_top_k(rank, nranks, count, scale, after.last_codec, *result);
  }
  return kPluginRankOk;
}

int check_decisions(ncclComm_t comm, int rank, bool multi_node) {
  const char* policy =
      "rules:\n"
      "  - match: {name: \"embedding\\\\..*\"}\n"
      "    codec: none\n"
      "  - match: {link: inter, min_bytes: 1M}\n"
      "    codec: int4\n"
      "  - match: {min_bytes: 64K}\n"
      "    codec: int8\n";
  if (terseCommSetPolicy(comm, policy) != ncclSuccess) {
    return fail_with(rank, std::string("terseCommSetPolicy: ") + ncclGetLastError(comm));
  }
  struct Expectation {
    const char* name;
    size_t count;
    const char* codec;  // prefix of the spec
  };
  const Expectation expectations[] = {
      {"embedding.weight", 1 << 20, "none"},
      {"layer0.weight", 1 << 20, multi_node ? "int4" : "int8"},
      {"layer0.bias", 1 << 15, "int8"},
      {"layer0.norm", 1000, "none"},
  };
  for (const Expectation& e : expectations) {
    terseTensor tensor{};
    tensor.name = e.name;
    char codec[128], algorithm[32];
    if (terseCommDecide(comm, &tensor, e.count, ncclFloat32, ncclSum, codec, sizeof(codec),
                        algorithm, sizeof(algorithm)) != ncclSuccess) {
      return fail_with(rank, std::string("terseCommDecide: ") + ncclGetLastError(comm));
    }
    if (std::strncmp(codec, e.codec, std::strlen(e.codec)) != 0) {
      return fail_with(rank,
                       std::string(e.name) + ": policy chose " + codec + ", expected " + e.codec);
    }
  }
  // `auto`: compressed across nodes behind a slow link (the multi-node runs set TERSE_NET_GBPS=1),
  // none inside one node, where shared memory is faster than any codec.
  if (terseCommSetPolicy(comm, "rules:\n  - codec: auto\n") != ncclSuccess) {
    return fail_with(rank, std::string("terseCommSetPolicy auto: ") + ncclGetLastError(comm));
  }
  terseTensor tensor{};
  tensor.name = "layer1.weight";
  char codec[128], algorithm[32];
  if (terseCommDecide(comm, &tensor, 1 << 20, ncclFloat32, ncclSum, codec, sizeof(codec), algorithm,
                      sizeof(algorithm)) != ncclSuccess) {
    return fail_with(rank, std::string("terseCommDecide auto: ") + ncclGetLastError(comm));
  }
  const char* expected = multi_node ? "int8" : "none";
  if (std::strncmp(codec, expected, std::strlen(expected)) != 0) {
    return fail_with(rank, std::string("auto chose ") + codec + ", expected " + expected);
  }
  // A bad policy is refused and the old one stays.
  if (terseCommSetPolicy(comm, "rules:\n  - codec: nosuchcodec\n") == ncclSuccess) {
    return fail_with(rank, "a policy naming an unknown codec was accepted");
  }
  return kPluginRankOk;
}

}  // namespace

int run_compressed(ncclComm_t comm, int rank, int nranks) {
  std::vector<float> result;
  double bound = 0;
  std::string algorithm;
  int code =
      checked_allreduce(comm, rank, nranks, (1 << 16) + 5, ncclSum, &result, &bound, &algorithm);
  if (code != kPluginRankOk) return code;
  code = checked_allreduce(comm, rank, nranks, 4099, ncclAvg, &result, &bound, &algorithm);
  if (code != kPluginRankOk) return code;

  const bool multi_node = getenv("TERSE_HOSTID") != nullptr && nranks > 1;
  if (multi_node) {
    // The same call on a flat communicator (TERSE_HIERARCHICAL is read at creation).
    std::vector<float> hierarchical;
    double hierarchical_bound = 0;
    std::string hierarchical_algorithm;
    code = checked_allreduce(comm, rank, nranks, 1 << 18, ncclSum, &hierarchical,
                             &hierarchical_bound, &hierarchical_algorithm);
    if (code != kPluginRankOk) return code;
    setenv("TERSE_HIERARCHICAL", "off", 1);
    ncclComm_t flat = nullptr;
    if (ncclCommSplit(comm, 0, rank, &flat, nullptr) != ncclSuccess) {
      return fail_with(rank, std::string("ncclCommSplit: ") + ncclGetLastError(comm));
    }
    std::vector<float> flat_result;
    double flat_bound = 0;
    std::string flat_algorithm;
    code = checked_allreduce(flat, rank, nranks, 1 << 18, ncclSum, &flat_result, &flat_bound,
                             &flat_algorithm);
    ncclCommDestroy(flat);
    if (code != kPluginRankOk) return code;
    const bool expect_hierarchical = std::string(getenv("PLUGIN_TEST_EXPECT_HIERARCHICAL")
                                                     ? getenv("PLUGIN_TEST_EXPECT_HIERARCHICAL")
                                                     : "1") == "1";
    // Node-aware: through the node leaders, or by rails (the planner weighs both).
    const auto node_aware = [](const std::string& algorithm) {
      return algorithm == "hierarchical" || algorithm == "rail";
    };
    if (expect_hierarchical != node_aware(hierarchical_algorithm) || node_aware(flat_algorithm)) {
      return fail_with(rank, "algorithms: " + hierarchical_algorithm + " with nodes, " +
                                 flat_algorithm + " flat");
    }
    for (size_t i = 0; i < flat_result.size(); ++i) {
      const double gap = std::fabs(double(hierarchical[i]) - flat_result[i]);
      if (!(gap <= hierarchical_bound + flat_bound)) {
        return fail_with(rank, "hierarchical and flat differ by " + std::to_string(gap) +
                                   " at element " + std::to_string(i));
      }
    }
  }
  return check_decisions(comm, rank, multi_node);
}

int run_auto_agreement(ncclComm_t comm, int rank, int nranks) {
  std::vector<float> result;
  double bound = 0;
  std::string algorithm;
  const int code =
      checked_allreduce(comm, rank, nranks, 1 << 18, ncclSum, &result, &bound, &algorithm);
  if (code != kPluginRankOk) return code;
  terseStats stats{};
  if (terseCommGetStats(comm, &stats) != ncclSuccess) {
    return fail_with(rank, std::string("terseCommGetStats: ") + ncclGetLastError(comm));
  }
  printf("plan: %s %s\n", stats.last_codec, stats.last_algorithm);
  fflush(stdout);
  return kPluginRankOk;
}

}  // namespace plugin_test
