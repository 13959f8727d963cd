// Rank arithmetic of trees and of recursive doubling (pure, no communication;
// tests/collectives/test_tree_pattern.cpp).
//
// Binomial tree. Ranks are renumbered relative to the root, v = (rank - root) mod n, so the root
// is v = 0. The parent of v > 0 is v with its lowest set bit cleared; the children of v are
// v + 2^k for every 2^k below v's lowest set bit (every 2^k < n for the root) with v + 2^k < n.
//
//   n = 8, root 0:   0 -> 1, 2, 4      2 -> 3      4 -> 5, 6      6 -> 7
//
// The subtree under child v + 2^k holds the 2^k ranks v + 2^k .. v + 2^(k+1) - 1 (fewer where
// the rank range ends), so a broadcast sends to the child of largest k first (children in
// descending order) and a reduce takes the child of smallest k first (ascending order), each
// finishing in ceil(log2 n) rounds.
//
// Recursive doubling over any n. Let p be the largest power of two <= n and extra = n - p.
// The first 2 * extra ranks pair up: the even one of each pair (a "folded" rank) hands its data
// to its odd partner and sits out; the odd one stands for both. The p remaining ranks take
// the new numbers 0..p-1 (odd rank r < 2 * extra becomes r / 2, rank r >= 2 * extra becomes
// r - extra) and exchange with new rank ^ 2^k in round k = 0..log2(p) - 1. Finally each odd rank
// hands the result back to its folded partner.
//
//   n = 6: p = 4, extra = 2; ranks 0 and 2 fold into 1 and 3; new ranks 1->0, 3->1, 4->2, 5->3.
#pragma once

#include <vector>

namespace terse {

// Rounds of a doubling pattern over n positions: the smallest r with 2^r >= n (0 for n <= 1).
inline int ceil_log2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

// One rank's view of a binomial tree rooted at `root`.
class BinomialTree {
 public:
  BinomialTree(int rank, int nranks, int root) : nranks_(nranks), root_(root) {
    relative_ = ((rank - root) % nranks + nranks) % nranks;
  }

  // This rank's number relative to the root (0 for the root).
  int relative_rank() const { return relative_; }
  bool is_root() const { return relative_ == 0; }

  // The parent's rank, or -1 for the root.
  int parent() const {
    if (relative_ == 0) return -1;
    return absolute(relative_ & (relative_ - 1));
  }

  // The children's ranks in ascending k (child v + 2^k spans up to 2^k ranks): the order a
  // reduce combines in; a broadcast sends in the reverse order.
  std::vector<int> children() const {
    std::vector<int> result;
    // The root may have children at every power of two below n; others below their lowest bit.
    const int limit = relative_ == 0 ? nranks_ : (relative_ & -relative_);
    for (int mask = 1; mask < limit && relative_ + mask < nranks_; mask <<= 1) {
      result.push_back(absolute(relative_ + mask));
    }
    return result;
  }

  // The number of ranks in this rank's subtree, itself included.
  int subtree_size() const {
    const int lowest = relative_ == 0 ? nranks_ : (relative_ & -relative_);
    const int end = relative_ + lowest;
    return (end < nranks_ ? end : nranks_) - relative_;
  }

 private:
  int absolute(int relative) const { return (relative + root_) % nranks_; }

  int nranks_;
  int root_;
  int relative_;
};

// One rank's view of a chain from `root`: root -> root+1 -> ... -> root+n-1 (mod n). The tree
// of a pipelined broadcast (data flows down the chain) or reduce (partial results flow up to
// the root): every link carries the data once, so with enough pieces in flight it runs at the
// bandwidth of one link whatever n, at the price of n-1 hops of latency.
class Chain {
 public:
  Chain(int rank, int nranks, int root) : nranks_(nranks), root_(root) {
    relative_ = ((rank - root) % nranks + nranks) % nranks;
  }
  int relative_rank() const { return relative_; }
  bool is_root() const { return relative_ == 0; }
  // The rank before this one (towards the root), or -1 for the root.
  int parent() const { return relative_ == 0 ? -1 : absolute(relative_ - 1); }
  // The rank after this one: none for the last rank.
  std::vector<int> children() const {
    if (relative_ + 1 >= nranks_) return {};
    return {absolute(relative_ + 1)};
  }

 private:
  int absolute(int relative) const { return (relative + root_) % nranks_; }

  int nranks_;
  int root_;
  int relative_;
};

// One rank's role in recursive doubling (see the top of this file).
class RecursiveDoubling {
 public:
  enum class Role {
    kFolded,     // hands its data to fold_partner(), then waits for the result from it
    kFoldHost,   // takes fold_partner()'s data first and hands the result back at the end
    kExchanger,  // takes part in the exchange rounds only
  };

  RecursiveDoubling(int rank, int nranks) : rank_(rank) {
    power_ = 1;
    while (power_ * 2 <= nranks) power_ *= 2;
    extra_ = nranks - power_;
  }

  // The largest power of two <= nranks: the ranks taking part in the exchange rounds.
  int power_of_two() const { return power_; }
  int rounds() const {
    int rounds = 0;
    for (int p = 1; p < power_; p <<= 1) ++rounds;
    return rounds;
  }

  Role role() const {
    if (rank_ >= 2 * extra_) return Role::kExchanger;
    return rank_ % 2 == 0 ? Role::kFolded : Role::kFoldHost;
  }

  // The other rank of a fold pair (kFolded and kFoldHost only; -1 otherwise).
  int fold_partner() const {
    if (rank_ >= 2 * extra_) return -1;
    return rank_ % 2 == 0 ? rank_ + 1 : rank_ - 1;
  }

  // This rank's number among the exchangers (-1 for a folded rank).
  int exchange_rank() const {
    if (rank_ >= 2 * extra_) return rank_ - extra_;
    return rank_ % 2 == 0 ? -1 : rank_ / 2;
  }

  // The rank (original numbering) of exchanger number `exchange_rank`.
  int rank_of_exchanger(int exchange_rank) const {
    return exchange_rank < extra_ ? 2 * exchange_rank + 1 : exchange_rank + extra_;
  }

  // The partner (original numbering) in exchange round `round` (exchangers and hosts only).
  int round_partner(int round) const { return rank_of_exchanger(exchange_rank() ^ (1 << round)); }

 private:
  int rank_;
  int power_;
  int extra_;
};

}  // namespace terse
