// Ranks grouped into nodes by host identity (transport/host_identity.h: host name + boot id, or
// TERSE_HOSTID). Pure: the same host strings give the same layout on every rank, which is what
// lets every rank take the same hierarchical decision without talking.
#pragma once

#include <string>
#include <vector>

namespace terse {

struct NodeLayout {
  std::vector<int> node_of;               // by rank (or group position): its node
  std::vector<std::vector<int>> members;  // by node: its ranks, increasing (the leader first)

  int node_count() const { return static_cast<int>(members.size()); }
  // The rank's index among its node's members (its local rank); -1 for a rank out of range.
  int local_index(int rank) const;
  // More than one node.
  bool multi_node() const { return members.size() > 1; }
  // Some node holds more than one rank (so there is intra-node traffic to spare).
  bool node_with_several_ranks() const;
};

// hosts[r] is rank r's host identity. Nodes are numbered in the order of their lowest rank, so
// node 0 holds rank 0. An empty string is a host like any other.
NodeLayout group_into_nodes(const std::vector<std::string>& hosts);

}  // namespace terse
