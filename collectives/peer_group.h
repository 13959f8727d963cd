// An ordered group of a communicator's ranks: what the group forms of the dense allreduces
// (allreduce_algorithms.h) and every compressed algorithm (compressed/compressed_args.h) run
// over, so that a hierarchical or rail-aware algorithm composes the same pipelined ring and
// small-message exchange on part of the communicator, in any order, instead of keeping its own
// copies.
//
// Position p of the group is transport rank ranks[p]; an algorithm arranges positions, not
// ranks (the ring sends from position p to p+1, recursive doubling pairs positions), so the
// order of `ranks` is the ring's order. Every rank of the group must hold the same list.
#pragma once

#include <string>
#include <vector>

namespace terse {

// `index` is this rank's position: ranks[index] == transport->rank(). `hosts` says which node
// each of them runs on (host identities, transport/host_identity.h, which TERSE_HOSTID
// overrides): the hierarchical compressed algorithm groups by it; empty means one node. The
// dense algorithms read only `ranks` and `index`.
struct PeerGroup {
  std::vector<int> ranks;
  int index = 0;
  std::vector<std::string> hosts;

  int size() const { return static_cast<int>(ranks.size()); }
  int rank_at(int position) const { return ranks[static_cast<size_t>(position)]; }

  // Every rank of a communicator of `nranks` in rank order, this one at `rank`.
  static PeerGroup whole(int rank, int nranks) {
    PeerGroup group;
    group.ranks.resize(static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) group.ranks[static_cast<size_t>(r)] = r;
    group.index = rank;
    return group;
  }
};

}  // namespace terse
