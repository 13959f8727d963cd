#include "compressed_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "codecs/codec_registry.h"
#include "codecs/dtype.h"
#include "common/result.h"
#include "model_steps.h"

namespace terse {
namespace model {
namespace {

// The algorithm a flat call runs for a codec and size when none is forced (the table the
// algorithms' README states: powersgd, randomk with a shared seed, sparse_allgather for other
// sparsifiers; dense codecs by bytes: tree below 16 KiB, recursive doubling below 256 KiB, sra).
std::string default_algorithm(const Codec& codec, size_t bytes) {
  if (codec.low_rank() != nullptr) return "powersgd";
  if (codec.id() == CodecId::kRandomK && codec.needs_shared_seed()) return "randomk";
  if (codec.family() == CodecFamily::kSparse) return "sparse_allgather";
  if (bytes < (size_t{16} << 10)) return "tree";
  if (bytes < (size_t{256} << 10)) return "recursive_doubling";
  return "sra";
}

GroupResult run_algorithm(const std::string& algorithm, GroupCall& call) {
  // One rank copies its input; its residual is never touched, so it is still zero.
  if (call.size() == 1) return GroupResult{call.contributions[0], {}};
  if (call.count == 0) return GroupResult{};
  if (algorithm == "sra") return model_sra(call);
  if (algorithm == "ring") return model_ring(call);
  if (algorithm == "recursive_doubling") return model_recursive_doubling(call);
  if (algorithm == "tree") return model_tree(call);
  if (algorithm == "sparse_allgather") return model_sparse_allgather(call);
  if (algorithm == "randomk") return model_randomk(call);
  if (algorithm == "powersgd") return model_powersgd(call);
  throw std::runtime_error("model: no algorithm named " + algorithm);
}

// Nodes by host, in order of first appearance; each node's positions in order (leader first).
std::vector<std::vector<int>> nodes_of(const std::vector<std::string>& hosts, int n) {
  std::vector<std::string> names;
  std::vector<std::vector<int>> nodes;
  for (int r = 0; r < n; ++r) {
    const std::string host = hosts.empty() ? std::string() : hosts[static_cast<size_t>(r)];
    auto found = std::find(names.begin(), names.end(), host);
    if (found == names.end()) {
      names.push_back(host);
      nodes.emplace_back();
      found = names.end() - 1;
    }
    nodes[static_cast<size_t>(found - names.begin())].push_back(r);
  }
  return nodes;
}

float kind_value(float v) {
  return std::isnan(v) ? NAN : v;
}

bool same_kind(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;  // both infinite here
}

}  // namespace

struct CompressedModel::Rank {
  std::vector<float> residual;
  std::vector<float> owner_residual;
  size_t owner_offset = 0;
  std::unique_ptr<CodecState> state;
};

CompressedModel::CompressedModel(const std::string& codec_spec, int nranks, MemoryKind memory)
    : memory_(memory), nranks_(nranks), ranks_(static_cast<size_t>(nranks)) {
  if (create_codec(codec_spec, &codec_) != ncclSuccess) {
    error_ = last_error();
    codec_.reset();
  }
}

CompressedModel::~CompressedModel() = default;

const std::vector<float>& CompressedModel::residual(int rank) const {
  return ranks_[static_cast<size_t>(rank)].residual;
}

const std::vector<float>& CompressedModel::owner_residual(int rank) const {
  return ranks_[static_cast<size_t>(rank)].owner_residual;
}

size_t CompressedModel::owner_offset(int rank) const {
  return ranks_[static_cast<size_t>(rank)].owner_offset;
}

void CompressedModel::reset() {
  for (Rank& rank : ranks_) {
    std::fill(rank.residual.begin(), rank.residual.end(), 0.0f);
    rank.owner_residual.clear();
    rank.state.reset();
  }
  warm_q_.clear();
}

Expected CompressedModel::call(const CallSpec& spec, const std::vector<std::vector<uint8_t>>& in) {
  const int n = nranks();
  const size_t count = spec.count;
  if (count != count_) {
    // Residual memory recreates an entry whose tensor changed size.
    count_ = count;
    for (Rank& rank : ranks_) {
      rank.residual.assign(memory_ == MemoryKind::kResidual ? count : 0, 0.0f);
      rank.owner_residual.clear();
      rank.state.reset();
    }
    warm_q_.clear();
  }
  for (Rank& rank : ranks_) {
    if (rank.state == nullptr) rank.state = codec_->make_state(count, DType::kFloat32, spec.shape);
  }

  // The groups: every rank, or (hierarchical across nodes with a node of several ranks) the
  // node leaders with their node's exact fp32 sum (leader first, then members in order).
  std::vector<std::vector<int>> nodes = nodes_of(spec.hosts, n);
  bool several = false;
  for (const auto& node : nodes) several = several || node.size() > 1;
  const bool hierarchical = spec.algorithm == "hierarchical" && nodes.size() > 1 && several;
  // Rails: several nodes of one size above one (rail_allreduce.cpp); otherwise a rail call runs
  // its inner algorithm flat.
  bool equal = true;
  for (const auto& node : nodes) equal = equal && node.size() == nodes.front().size();
  const bool rails =
      spec.algorithm == "rail" && nodes.size() > 1 && nodes.front().size() > 1 && equal;
  std::string algorithm = spec.algorithm;
  if (spec.algorithm == "hierarchical" || spec.algorithm == "rail") {
    algorithm = !spec.inner_algorithm.empty()
                    ? spec.inner_algorithm
                    : default_algorithm(*codec_, count * dtype_size(spec.dtype));
  }
  GroupCall call;
  call.codec = codec_.get();
  call.seed = spec.seed;
  call.step = spec.step;
  call.warmup_progress = spec.warmup_progress;
  call.shape = spec.shape;
  call.count = count;
  call.piece_bytes = spec.piece_bytes;
  call.warm_q = codec_->low_rank() != nullptr ? &warm_q_ : nullptr;
  const auto load = [&](int rank, std::vector<float>* values, bool add) {
    for (size_t i = 0; i < count; ++i) {
      const float v = load_element(in[static_cast<size_t>(rank)].data(), spec.dtype, i);
      (*values)[i] = add ? (*values)[i] + v : v;
    }
  };
  std::vector<int> positions;  // the rank at each group position
  if (rails) {
    // rail_call() makes the group of each rail itself.
  } else if (hierarchical) {
    for (const auto& node : nodes) positions.push_back(node.front());
  } else {
    for (int r = 0; r < n; ++r) positions.push_back(r);
  }
  for (size_t g = 0; g < positions.size(); ++g) {
    const int rank = positions[g];
    std::vector<float> values(count);
    load(rank, &values, false);
    if (hierarchical) {
      for (size_t m = 1; m < nodes[g].size(); ++m) load(nodes[g][m], &values, true);
    }
    Rank& memory = ranks_[static_cast<size_t>(rank)];
    const bool keeps = !memory.residual.empty();
    if (keeps) {
      for (size_t i = 0; i < count; ++i) values[i] = values[i] + memory.residual[i];
    }
    call.contributions.push_back(std::move(values));
    call.residuals.push_back(keeps ? &memory.residual : nullptr);
    // The owner residual is acquired once the call has work: several ranks and elements.
    if (keeps && algorithm == "sra" && positions.size() > 1 && count > 0) {
      const Range chunk =
          near_equal(count, static_cast<int>(positions.size()), static_cast<int>(g));
      if (memory.owner_residual.size() != chunk.count) {
        memory.owner_residual.assign(chunk.count, 0.0f);
      }
      memory.owner_offset = chunk.offset;
      call.owner_residuals.push_back(&memory.owner_residual);
    } else {
      call.owner_residuals.push_back(nullptr);
    }
    call.states.push_back(memory.state.get());
  }

  GroupResult group;
  if (rails) {
    group = rail_call(spec, in, nodes, call);
  } else {
    group = run_algorithm(algorithm, call);
  }
  Expected expected;
  expected.result.resize(count);
  std::vector<uint8_t> stored(count * dtype_size(spec.dtype));
  const float scale = static_cast<float>(spec.result_scale);
  for (size_t i = 0; i < count; ++i) {
    const float v = spec.result_scale == 1.0 ? group.sum[i] : group.sum[i] * scale;
    store_element(stored.data(), spec.dtype, i, v);
    expected.result[i] = kind_value(load_element(stored.data(), spec.dtype, i));
  }
  if (!group.tolerance.empty()) {
    // The scaled tolerance, plus a whole unit in the last place of a 16-bit or fp8 output: the
    // two fp32 values may round to neighbouring ones (an ulp is at most 2^-10 of the value for
    // fp16, 2^-7 for bf16, 2^-3 for E4M3, 2^-2 for E5M2).
    const double unit = spec.dtype == DType::kFloat16      ? std::ldexp(1.0, -10)
                        : spec.dtype == DType::kBFloat16   ? std::ldexp(1.0, -7)
                        : spec.dtype == DType::kFloat8E4M3 ? std::ldexp(1.0, -3)
                        : spec.dtype == DType::kFloat8E5M2 ? std::ldexp(1.0, -2)
                                                           : 0.0;
    expected.tolerance.resize(count);
    for (size_t i = 0; i < count; ++i) {
      const double t = group.tolerance[i] * std::fabs(spec.result_scale);
      expected.tolerance[i] = t + unit * (std::fabs(double(expected.result[i])) + t);
    }
    if (algorithm == "powersgd") {
      double largest = 0;
      for (const auto& values : call.contributions) {
        for (float v : values) largest = std::max(largest, std::fabs(double(v)));
      }
      expected.residual_tolerance = 1e-4 * largest * n;
    }
  }
  return expected;
}

GroupResult CompressedModel::rail_call(const CallSpec& spec,
                                       const std::vector<std::vector<uint8_t>>& in,
                                       const std::vector<std::vector<int>>& nodes,
                                       const GroupCall& base) {
  const size_t count = spec.count;
  const int local = static_cast<int>(nodes.front().size());
  const int rails = static_cast<int>(nodes.size());
  GroupResult whole;
  whole.sum.assign(count, 0.0f);
  bool tolerant = false;
  std::vector<double> tolerance(count, 0.0);
  for (int i = 0; i < local; ++i) {
    const Range chunk = near_equal(count, local, i);
    // The inner algorithm the code runs on this chunk when the plan names none.
    const std::string inner =
        !spec.inner_algorithm.empty()
            ? spec.inner_algorithm
            : default_algorithm(*codec_, chunk.count * dtype_size(spec.dtype));
    GroupCall call = base;
    call.count = chunk.count;
    call.contributions.clear();
    call.residuals.clear();
    call.owner_residuals.clear();
    call.states.clear();
    std::vector<std::vector<float>> residuals(static_cast<size_t>(rails));
    for (int g = 0; g < rails; ++g) {
      // Node g's sum of chunk i, its members in local-index order.
      std::vector<float> values(chunk.count, 0.0f);
      for (int m = 0; m < local; ++m) {
        const int member = nodes[static_cast<size_t>(g)][static_cast<size_t>(m)];
        for (size_t e = 0; e < chunk.count; ++e) {
          const float v =
              load_element(in[static_cast<size_t>(member)].data(), spec.dtype, chunk.offset + e);
          values[e] = m == 0 ? v : values[e] + v;
        }
      }
      const int rank = nodes[static_cast<size_t>(g)][static_cast<size_t>(i)];
      Rank& memory = ranks_[static_cast<size_t>(rank)];
      const bool keeps = !memory.residual.empty();
      if (keeps) {
        residuals[static_cast<size_t>(g)].assign(
            memory.residual.begin() + chunk.offset,
            memory.residual.begin() + chunk.offset + chunk.count);
        for (size_t e = 0; e < chunk.count; ++e) values[e] += residuals[static_cast<size_t>(g)][e];
      }
      call.contributions.push_back(std::move(values));
      call.residuals.push_back(keeps ? &residuals[static_cast<size_t>(g)] : nullptr);
      if (keeps && inner == "sra" && rails > 1 && chunk.count > 0) {
        const Range owned = near_equal(chunk.count, rails, g);
        if (memory.owner_residual.size() != owned.count) {
          memory.owner_residual.assign(owned.count, 0.0f);
        }
        memory.owner_offset = chunk.offset + owned.offset;
        call.owner_residuals.push_back(&memory.owner_residual);
      } else {
        call.owner_residuals.push_back(nullptr);
      }
      call.states.push_back(nullptr);  // rails run stateless codecs only
    }
    const GroupResult part = run_algorithm(inner, call);
    for (int g = 0; g < rails; ++g) {
      Rank& memory =
          ranks_[static_cast<size_t>(nodes[static_cast<size_t>(g)][static_cast<size_t>(i)])];
      if (memory.residual.empty()) continue;
      std::copy(residuals[static_cast<size_t>(g)].begin(), residuals[static_cast<size_t>(g)].end(),
                memory.residual.begin() + chunk.offset);
    }
    std::copy(part.sum.begin(), part.sum.end(), whole.sum.begin() + chunk.offset);
    if (!part.tolerance.empty()) {
      tolerant = true;
      std::copy(part.tolerance.begin(), part.tolerance.end(), tolerance.begin() + chunk.offset);
    }
  }
  if (tolerant) whole.tolerance = std::move(tolerance);
  return whole;
}

Comparison compare(const Expected& expected, DType dtype, const uint8_t* got, size_t count) {
  Comparison comparison;
  double total = 0;
  size_t finite = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = expected.result[i];
    const float have = load_element(got, dtype, i);
    const double allowed = expected.tolerance.empty() ? 0.0 : expected.tolerance[i];
    bool match;
    if (!std::isfinite(want) || !std::isfinite(have)) {
      match = !std::isfinite(want) && !std::isfinite(have) && same_kind(want, have);
    } else {
      const double error = std::fabs(double(have) - double(want));
      match = expected.tolerance.empty()
                  ? float_bits(have) == float_bits(want) || (have == 0.0f && want == 0.0f)
                  : error <= allowed;
      comparison.max_error = std::max(comparison.max_error, error);
      comparison.max_expected = std::max(comparison.max_expected, std::fabs(double(want)));
      total += error;
      ++finite;
    }
    if (!match) {
      if (comparison.mismatches < 3) {
        char line[160];
        std::snprintf(line, sizeof(line), "%selement %zu = %.9g, model %.9g (allowed %.3g)",
                      comparison.first.empty() ? "" : "; ", i, have, want, allowed);
        comparison.first += line;
      }
      ++comparison.mismatches;
    }
  }
  comparison.mean_error = finite > 0 ? total / double(finite) : 0.0;
  return comparison;
}

Comparison compare_all(const Expected& expected, DType dtype,
                       const std::vector<std::vector<uint8_t>>& outputs) {
  Comparison all;
  for (size_t r = 0; r < outputs.size(); ++r) {
    Comparison one = compare(expected, dtype, outputs[r].data(), expected.result.size());
    if (one.mismatches > 0 && all.mismatches == 0)
      all.first = "rank " + std::to_string(r) + ": " + one.first;
    all.mismatches += one.mismatches;
    all.max_error = std::max(all.max_error, one.max_error);
    all.mean_error = std::max(all.mean_error, one.mean_error);
    all.max_expected = std::max(all.max_expected, one.max_expected);
  }
  return all;
}

Comparison compare_residual(const std::vector<float>& model, const std::vector<float>& got,
                            double tolerance) {
  Comparison comparison;
  if (model.size() != got.size()) {
    comparison.mismatches = std::max(model.size(), got.size());
    comparison.first = "residual holds " + std::to_string(got.size()) + " elements, model " +
                       std::to_string(model.size());
    return comparison;
  }
  for (size_t i = 0; i < model.size(); ++i) {
    const double error = std::fabs(double(got[i]) - double(model[i]));
    const bool match = tolerance == 0 ? float_bits(got[i]) == float_bits(model[i]) ||
                                            (got[i] == 0.0f && model[i] == 0.0f)
                                      : error <= tolerance;
    if (std::isfinite(error)) comparison.max_error = std::max(comparison.max_error, error);
    if (!match) {
      if (comparison.mismatches < 3) {
        char line[128];
        std::snprintf(line, sizeof(line), "%sresidual %zu = %.9g, model %.9g",
                      comparison.first.empty() ? "" : "; ", i, got[i], model[i]);
        comparison.first += line;
      }
      ++comparison.mismatches;
    }
  }
  return comparison;
}

}  // namespace model
}  // namespace terse
