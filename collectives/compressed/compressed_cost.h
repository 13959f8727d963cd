// The compressed algorithms' costs (compressed_algorithm_table.cpp's rows), on the shared
// arithmetic of collectives/cost_model.h, each modelled as its algorithm is written
// (collectives/compressed/*.cpp). Pure arithmetic, like the rest of the cost model.
#pragma once

#include "collectives/cost_model.h"

namespace terse {

// Any compressed algorithm on one rank: an encode and a decode of the tensor, nothing sent.
Prediction one_rank_compressed_cost(const CostQuery& query);

// Flat algorithms and the codec families' own: on the whole group, for two ranks or more.
Prediction sra_cost(const CostQuery& query);
Prediction compressed_ring_cost(const CostQuery& query);
Prediction compressed_recursive_doubling_cost(const CostQuery& query);
Prediction compressed_tree_cost(const CostQuery& query);
Prediction sparse_allgather_cost(const CostQuery& query);
Prediction randomk_cost(const CostQuery& query);
Prediction powersgd_cost(const CostQuery& query);

// The hierarchical algorithm: the node sums gathered at each node's leader over the intra-node
// link, `inner` (a flat algorithm's cost) between the leaders over the inter-node link, the
// result broadcast back. With one node, or one rank per node, `inner` on the whole group.
Prediction hierarchical_cost(CostFunction inner, const CostQuery& query);

// The rail-aligned algorithm: a reduce-scatter inside each node, `inner` on each rank's 1/L chunk
// between local rank i of every node, the L rails sharing the node's links.nics NICs, an
// allgather inside each node. The group must have nodes of equal size. With one node, or one
// rank per node, `inner` on the whole group.
Prediction rail_cost(CostFunction inner, const CostQuery& query);

}  // namespace terse
