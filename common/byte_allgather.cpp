#include "common/byte_allgather.h"

#include <algorithm>
#include <cstring>

namespace terse {

Result allgather_bytes(const FixedAllgather& allgather, int nranks,
                       const std::vector<uint8_t>& mine, uint64_t max_bytes, const char* what,
                       std::vector<std::vector<uint8_t>>* table) {
  const size_t n = static_cast<size_t>(nranks);
  const uint64_t length = mine.size();
  std::vector<uint64_t> lengths(n, 0);
  TERSE_CHECK(allgather(&length, sizeof(length), lengths.data()));
  uint64_t longest = 0;
  for (size_t rank = 0; rank < n; ++rank) {
    if (lengths[rank] > max_bytes) {
      return fail(Result::kInvalidUsage,
                  "rank %zu would send %llu bytes of %s, more than the %llu any terse sends; do "
                  "all ranks run the same terse?",
                  rank, static_cast<unsigned long long>(lengths[rank]), what,
                  static_cast<unsigned long long>(max_bytes));
    }
    longest = std::max(longest, lengths[rank]);
  }
  // Every rank computed the same `longest` from the same lengths, so all pass the same size.
  std::vector<uint8_t> padded(longest, 0), all(longest * n);
  if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
  if (longest > 0) TERSE_CHECK(allgather(padded.data(), longest, all.data()));
  table->assign(n, {});
  for (size_t rank = 0; rank < n; ++rank) {
    const uint8_t* start = all.data() + rank * longest;
    (*table)[rank].assign(start, start + lengths[rank]);
  }
  return Result::kSuccess;
}

}  // namespace terse
