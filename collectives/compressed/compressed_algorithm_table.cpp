#include "collectives/compressed/compressed_algorithm_table.h"

#include <cmath>
#include <cstdint>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/compressed_cost.h"
#include "collectives/tree_pattern.h"

namespace terse {
namespace {

bool stateless(const Codec& codec, size_t count) {
  return !codec.stateful(count, DType::kFloat32, MatrixShape{});
}

// Algorithms that decode, add and re-encode: any codec whose messages describe a whole range on
// their own (dense or sparse) and that keeps no per-tensor state.
bool accepts_reencoding(const Codec& codec, size_t count) {
  return codec.family() != CodecFamily::kLowRank && stateless(codec, count);
}

bool accepts_sparse(const Codec& codec, size_t) {
  return codec.family() == CodecFamily::kSparse;
}

// A dense sum of the message's values is the message of the sum (Codec::linear), and the k
// values line up across ranks only under one seed: Random-K with a shared seed. The algorithm
// reads the message as Random-K's (k values after the header), so the id stays part of the test.
bool accepts_shared_randomk(const Codec& codec, size_t) {
  return codec.id() == CodecId::kRandomK && codec.linear() && codec.needs_shared_seed();
}

bool accepts_powersgd(const Codec& codec, size_t) {
  return codec.low_rank() != nullptr;
}

bool accepts_any(const Codec&, size_t) {
  return true;
}

int one_or_none(int ranks) {
  return ranks > 1 ? 1 : 0;
}
int sra_steps(int ranks) {
  return ranks > 1 ? 2 : 0;
}
// n - 1 hops re-encode the partial sum of a chunk, the owner encodes the final chunk once more.
int ring_steps(int ranks) {
  return ranks > 1 ? ranks : 0;
}
// Each round encodes the running sum; ranks beyond a power of two fold in first (one encode)
// and get the result back after (one more).
int recursive_doubling_steps(int ranks) {
  if (ranks <= 1) return 0;
  const int rounds = ceil_log2(ranks);
  const bool power_of_two = (1 << rounds) == ranks;
  return power_of_two ? rounds : (rounds - 1) + 2;
}
// The deepest path of a binary tree re-encodes at every level, the root encodes the result once.
int tree_steps(int ranks) {
  return ranks > 1 ? ceil_log2(ranks + 1) : 0;
}
// The leaders run the default choice for the codec and size; the most any of those takes bounds
// it (the node-level sums inside are exact).
int hierarchical_steps(int ranks) {
  int most = sra_steps(ranks);
  for (int steps : {recursive_doubling_steps(ranks), tree_steps(ranks), one_or_none(ranks)}) {
    most = steps > most ? steps : most;
  }
  return most;
}

}  // namespace

const std::vector<CompressedAlgorithmInfo>& compressed_algorithm_table() {
  using R = CompressedRole;
  static const std::vector<CompressedAlgorithmInfo> table = {
      // ---- flat: any codec they accept, on the whole group ----
      {1, "sra",
       "scatter-reduce-allgather: encode once, all-to-all, owners decode+sum and re-encode, "
       "allgather; 2 lossy steps at any rank count (dense codecs, large tensors)",
       R::kFlat, true, accepts_reencoding, sra_steps, compressed_sra_allreduce, sra_cost, nullptr,
       nullptr, sra_stage_residual_elements, kCompressedRecursiveDoublingMaxBytes, SIZE_MAX},
      // Not weighed by auto: its error grows with the rank count.
      {2, "ring",
       "compressed ring: decode-add-re-encode per hop, pipelined; error grows with ranks", R::kFlat,
       false, accepts_reencoding, ring_steps, compressed_ring_allreduce, compressed_ring_cost},
      {3, "recursive_doubling",
       "compressed recursive doubling: whole-buffer messages, log2(n) lossy rounds (mid sizes)",
       R::kFlat, true, accepts_reencoding, recursive_doubling_steps,
       compressed_recursive_doubling_allreduce, compressed_recursive_doubling_cost, nullptr,
       nullptr, nullptr, kCompressedTreeMaxBytes, kCompressedRecursiveDoublingMaxBytes},
      {4, "tree", "compressed binary tree: reduce up re-encoding, broadcast down; small messages",
       R::kFlat, true, accepts_reencoding, tree_steps, compressed_tree_allreduce,
       compressed_tree_cost, nullptr, nullptr, nullptr, 0, kCompressedTreeMaxBytes},

      // ---- a codec family's own, the most specific first ----
      {7, "powersgd",
       "PowerSGD: allreduce(P), orthogonalise, allreduce(Q), warm-started, with residual",
       R::kFamily, true, accepts_powersgd, one_or_none, powersgd_allreduce, powersgd_cost},
      {6, "randomk", "Random-K with a shared seed: dense allreduce of the k shared positions only",
       R::kFamily, true, accepts_shared_randomk, one_or_none, randomk_allreduce, randomk_cost},
      {5, "sparse_allgather",
       "allgatherv of (index, value) lists and scatter-add; dense exchange when the union gets "
       "dense (sparse codecs)",
       R::kFamily, true, accepts_sparse, one_or_none, sparse_allgather_allreduce,
       sparse_allgather_cost},

      // ---- composite: a flat algorithm inside a node-aware structure ----
      // Weighed where a node holds several ranks (or TERSE_HIERARCHICAL=on asks), each around
      // every flat algorithm auto weighs.
      {9, "rail",
       "reduce-scatter inside each node, local rank i compresses chunk i with local rank i of "
       "every node (its rail, its NIC), allgather inside each node; nodes of equal size, "
       "stateless codecs",
       R::kComposite, true, accepts_reencoding, hierarchical_steps, rail_allreduce, nullptr,
       rail_cost, rail_applies, rail_stage_residual_elements},
      {8, "hierarchical",
       "uncompressed inside each node, the default compressed algorithm between node leaders",
       R::kComposite, true, accepts_any, hierarchical_steps, hierarchical_allreduce, nullptr,
       hierarchical_cost, hierarchical_applies, hierarchical_stage_residual_elements},
  };
  return table;
}

const CompressedAlgorithmInfo* find_compressed_algorithm(const std::string& name) {
  for (const CompressedAlgorithmInfo& info : compressed_algorithm_table()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

std::string compressed_algorithm_names() {
  std::string names;
  for (const CompressedAlgorithmInfo& info : compressed_algorithm_table()) {
    if (!names.empty()) names += ",";
    names += info.name;
  }
  return names;
}

const CompressedAlgorithmInfo* default_compressed_algorithm(const Codec& codec, size_t count,
                                                            size_t element_bytes) {
  const std::vector<CompressedAlgorithmInfo>& table = compressed_algorithm_table();
  for (const CompressedAlgorithmInfo& info : table) {
    if (info.role == CompressedRole::kFamily && info.accepts(codec, count)) return &info;
  }
  const size_t bytes = count * element_bytes;
  for (const CompressedAlgorithmInfo& info : table) {
    if (info.role == CompressedRole::kFlat && bytes >= info.default_min_bytes &&
        bytes < info.default_max_bytes) {
      return &info;
    }
  }
  return &table.front();
}

Prediction predict(const CompressedAlgorithmInfo& algorithm, const CostQuery& query,
                   const CompressedAlgorithmInfo* inner) {
  if (query.group.ranks <= 1) return one_rank_compressed_cost(query);
  if (algorithm.role == CompressedRole::kComposite) {
    if (inner == nullptr || inner->cost == nullptr) return Prediction{INFINITY};
    return algorithm.composite_cost(inner->cost, query);
  }
  return algorithm.cost(query);
}

}  // namespace terse
