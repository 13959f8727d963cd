// How a group's ranks fall into nodes, and what the node-aware algorithms and the planner make
// of it: the layout (topology/node_layout.h, by host identity), whether a hierarchy or rails
// apply, the shape the cost model sees, the leaders and the rails' chunks. Pure, like
// ring_pattern.h: the same hosts give the same answers on every rank, so every rank plans and
// runs alike without talking.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/peer_group.h"
#include "collectives/ring_pattern.h"
#include "topology/node_layout.h"

namespace terse {

// The group's nodes, by group position; a group without hosts is one node.
inline NodeLayout layout_of(const PeerGroup& group) {
  return group_into_nodes(group.hosts.empty()
                              ? std::vector<std::string>(static_cast<size_t>(group.size()))
                              : group.hosts);
}

// Several nodes, one of them with several ranks: there is intra-node traffic to spare, so the
// hierarchical algorithm (and rails, on equal nodes) can pay.
inline bool hierarchy_pays(const NodeLayout& layout) {
  return layout.multi_node() && layout.node_with_several_ranks();
}

// Every node holds as many ranks as the first.
inline bool equal_nodes(const NodeLayout& layout) {
  for (const std::vector<int>& members : layout.members) {
    if (members.size() != layout.members.front().size()) return false;
  }
  return true;
}

// Rails: several nodes, all of the same size, above one rank.
inline bool rails_apply(const NodeLayout& layout) {
  return layout.multi_node() && layout.members.front().size() >= 2 && equal_nodes(layout);
}

// The cost model's view of `nranks` ranks laid out as `layout`.
inline GroupShape shape_of(const NodeLayout& layout, int nranks) {
  GroupShape shape;
  shape.ranks = nranks;
  shape.nodes = std::max<int>(1, static_cast<int>(layout.members.size()));
  shape.most_ranks_per_node = 1;
  for (const std::vector<int>& members : layout.members) {
    shape.most_ranks_per_node =
        std::max(shape.most_ranks_per_node, static_cast<int>(members.size()));
  }
  return shape;
}

// The chunk of `count` elements that local rank `local` of a node of `local_ranks` reduces on
// its rail.
inline ElementRange rail_chunk(size_t count, int local_ranks, int local) {
  return near_equal_block(count, local_ranks, local);
}

// The group of `group`'s node leaders (each node's lowest position), in node order, with their
// hosts; this rank's position in it is its node's.
inline PeerGroup leaders_of(const PeerGroup& group, const NodeLayout& layout) {
  PeerGroup leaders;
  for (const std::vector<int>& members : layout.members) {
    leaders.ranks.push_back(group.rank_at(members.front()));
    if (!group.hosts.empty()) {
      leaders.hosts.push_back(group.hosts[static_cast<size_t>(members.front())]);
    }
  }
  leaders.index = layout.node_of[static_cast<size_t>(group.index)];
  return leaders;
}

}  // namespace terse
