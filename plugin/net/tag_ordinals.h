// How many messages of each NCCL tag one side of a comm has sent or posted receives for: the
// ordinal that, with the tag, names a data message on the wire (net_wire.h's data_tag). Both ends
// count alike, so the k-th send of tag t meets the k-th receive of tag t without a word between
// them, which is what lets a small message go before its receive is posted.
//
// A comm sees a handful of tags (NCCL's are per channel or per peer), so a short list searched
// from the most recent tag beats a hash map.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace terse::net {

class TagOrdinals {
 public:
  // The ordinal the next message of `tag` gets.
  uint32_t peek(int32_t tag) { return slot(tag); }
  // That ordinal, counted as used.
  uint32_t take(int32_t tag) { return slot(tag)++; }
  // Counts every ordinal up to `ordinal` of `tag` as used.
  void pass(int32_t tag, uint32_t ordinal) { slot(tag) = ordinal + 1; }

 private:
  uint32_t& slot(int32_t tag) {
    if (last_ < counts_.size() && counts_[last_].first == tag) return counts_[last_].second;
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i].first == tag) {
        last_ = i;
        return counts_[i].second;
      }
    }
    counts_.emplace_back(tag, 0);
    last_ = counts_.size() - 1;
    return counts_.back().second;
  }

  std::vector<std::pair<int32_t, uint32_t>> counts_;
  size_t last_ = 0;
};

}  // namespace terse::net
