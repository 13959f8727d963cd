#include "topology/node_layout.h"

#include <algorithm>
#include <unordered_map>

namespace terse {

int NodeLayout::local_index(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= node_of.size()) return -1;
  const std::vector<int>& mine = members[static_cast<size_t>(node_of[static_cast<size_t>(rank)])];
  auto found = std::lower_bound(mine.begin(), mine.end(), rank);  // members are increasing
  return found != mine.end() && *found == rank ? static_cast<int>(found - mine.begin()) : -1;
}

bool NodeLayout::node_with_several_ranks() const {
  for (const std::vector<int>& ranks : members) {
    if (ranks.size() > 1) return true;
  }
  return false;
}

NodeLayout group_into_nodes(const std::vector<std::string>& hosts) {
  NodeLayout layout;
  std::unordered_map<std::string, int> node_of_host;
  for (size_t rank = 0; rank < hosts.size(); ++rank) {
    auto [entry, added] =
        node_of_host.emplace(hosts[rank], static_cast<int>(layout.members.size()));
    if (added) layout.members.emplace_back();
    layout.node_of.push_back(entry->second);
    layout.members[static_cast<size_t>(entry->second)].push_back(static_cast<int>(rank));
  }
  return layout;
}

}  // namespace terse
