#include "ps/shard_placement.h"

#include <algorithm>
#include <numeric>

namespace terse {

std::vector<std::vector<ShardSpan>> place_tensors(const std::vector<PlacementInput>& tensors,
                                                  uint64_t split_bytes,
                                                  std::vector<uint64_t>* load) {
  const int nranks = static_cast<int>(load->size());
  std::vector<std::vector<ShardSpan>> placed(tensors.size());
  std::vector<size_t> small;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const PlacementInput& tensor = tensors[t];
    const uint64_t bytes = uint64_t(tensor.count) * tensor.element_bytes;
    if (bytes <= split_bytes) {
      small.push_back(t);
      continue;
    }
    const size_t rows = tensor.count / tensor.row_elements;
    for (int rank = 0; rank < nranks; ++rank) {
      // Row ranges balanced to within one row: rank r holds [r*rows/n, (r+1)*rows/n).
      const size_t first = rows * size_t(rank) / size_t(nranks);
      const size_t last = rows * size_t(rank + 1) / size_t(nranks);
      ShardSpan span{rank, first * tensor.row_elements, (last - first) * tensor.row_elements};
      (*load)[rank] += uint64_t(span.count) * tensor.element_bytes;
      placed[t].push_back(span);
    }
  }
  // Largest first is the classic greedy for balancing bins (LPT): a big tensor placed last
  // could land on a rank already loaded.
  std::stable_sort(small.begin(), small.end(), [&](size_t a, size_t b) {
    return tensors[a].count * tensors[a].element_bytes >
           tensors[b].count * tensors[b].element_bytes;
  });
  for (size_t t : small) {
    const int owner =
        static_cast<int>(std::min_element(load->begin(), load->end()) - load->begin());
    (*load)[owner] += uint64_t(tensors[t].count) * tensors[t].element_bytes;
    placed[t].push_back(ShardSpan{owner, 0, tensors[t].count});
  }
  return placed;
}

}  // namespace terse
