#include "collectives/algorithm_table.h"

#include <strings.h>

#include "collectives/allreduce_algorithms.h"
#include "collectives/allreduce_selection.h"
#include "collectives/collective_algorithms.h"

namespace terse {
namespace {

// Below this many bytes the trees' fewer hops beat the chains' bandwidth.
constexpr size_t kTreeMaxBytes = size_t{64} << 10;

// Ids: allreduce 1-19, broadcast 20-29, reduce 30-39, allgather 40-49, reduce-scatter 50-59,
// alltoall 60-69, gather 70-79, scatter 80-89, send/recv 90-99.
std::vector<AlgorithmInfo> make_table() {
  using K = CollectiveKind;
  return {
      // ---- allreduce (allreduce_*.cpp; boundary measured, see allreduce_selection.h) ----
      {1, "ring", K::kAllReduce,
       "ring reduce-scatter + allgather, pipelined in pieces: 2(n-1) steps, each rank sends "
       "2(n-1)/n of the buffer; large messages",
       ring_allreduce, dense_ring_allreduce_cost, kRingAllreduceMinBytesPerRank, SIZE_MAX,
       /*per_rank_bounds=*/true},
      {2, "recursive_doubling", K::kAllReduce,
       "whole-buffer exchanges with rank ^ 2^k, log2(n) steps (+2 to fold other counts), "
       "bitwise identical on all ranks; small messages",
       recursive_doubling_allreduce, dense_recursive_doubling_allreduce_cost, 0,
       kRingAllreduceMinBytesPerRank, /*per_rank_bounds=*/true},

      // ---- the other collectives (collective_algorithms.h) ----
      {20, "tree", K::kBroadcast,
       "binomial tree, pipelined in pieces: log2(n) hops; the root sends log2(n) times",
       run_binomial_broadcast, broadcast_tree_cost, 0, kTreeMaxBytes},
      {21, "chain", K::kBroadcast,
       "pipelined chain from the root: n-1 hops, every link carries the data once",
       run_chain_broadcast, broadcast_chain_cost, kTreeMaxBytes, SIZE_MAX},
      {30, "tree", K::kReduce,
       "binomial tree, pipelined in pieces: log2(n) levels; a rank combines up to log2(n) "
       "children",
       run_binomial_reduce, reduce_tree_cost, 0, kTreeMaxBytes},
      {31, "chain", K::kReduce,
       "pipelined chain towards the root: n-1 hops, every link carries the data once",
       run_chain_reduce, reduce_chain_cost, kTreeMaxBytes, SIZE_MAX},
      {40, "ring", K::kAllGather,
       "ring, pipelined in pieces: n-1 steps, bandwidth-optimal, no scratch", run_ring_allgather,
       allgather_ring_cost},
      {50, "ring", K::kReduceScatter,
       "ring, pipelined in pieces: n-1 steps, bandwidth-optimal, a few pieces of scratch",
       run_ring_reduce_scatter, reduce_scatter_ring_cost},
      {60, "pairwise", K::kAllToAll,
       "every block sent and received at once (in place: pairwise exchanges through scratch)",
       run_pairwise_alltoall, alltoall_pairwise_cost},
      {70, "direct", K::kGather, "every rank sends its block to the root, all at once",
       run_direct_gather, gather_scatter_direct_cost},
      {80, "direct", K::kScatter, "the root sends every rank its block, all at once",
       run_direct_scatter, gather_scatter_direct_cost},
      {90, "direct", K::kSend, "one message", run_direct_send, send_direct_cost},
      {91, "direct", K::kRecv, "one message", run_direct_recv, recv_direct_cost},
  };
}

}  // namespace

const std::vector<AlgorithmInfo>& algorithm_table() {
  static const std::vector<AlgorithmInfo> table = make_table();
  return table;
}

const AlgorithmInfo* find_algorithm(CollectiveKind kind, const std::string& name) {
  for (const AlgorithmInfo& info : algorithm_table()) {
    if (info.kind == kind && strcasecmp(info.name, name.c_str()) == 0) return &info;
  }
  return nullptr;
}

const AlgorithmInfo* default_algorithm(CollectiveKind kind, size_t bytes, int nranks) {
  const size_t share = bytes / static_cast<size_t>(nranks > 0 ? nranks : 1);
  const AlgorithmInfo* first = nullptr;
  for (const AlgorithmInfo& info : algorithm_table()) {
    if (info.kind != kind) continue;
    if (first == nullptr) first = &info;
    const size_t size = info.per_rank_bounds ? share : bytes;
    if (size >= info.default_min_bytes && size < info.default_max_bytes) return &info;
  }
  return first;
}

Prediction predict(const AlgorithmInfo& algorithm, const CostQuery& query) {
  const bool to_oneself_moves =
      algorithm.kind == CollectiveKind::kSend || algorithm.kind == CollectiveKind::kRecv;
  if (query.group.ranks <= 1 && !to_oneself_moves) return Prediction{};
  return algorithm.cost(query);
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kReduceScatter:
      return "reducescatter";
    case CollectiveKind::kAllToAll:
      return "alltoall";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
  }
  return "unknown";
}

}  // namespace terse
