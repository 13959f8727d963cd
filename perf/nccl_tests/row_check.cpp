#include "perf/nccl_tests/row_check.h"

#include <cmath>
#include <cstring>

#include "perf/nccl_tests/buffer_check.h"

namespace terse {
namespace perf {

void prepare_row_inputs(RankContext& context, const RowCase& row, bool in_place, bool nan_output) {
  const size_t element = row.type.bytes;
  char* recv = context.buffers.recv.get();
  if (nan_output) {
    fill_buffer(row.type.type, recv, row.counts.recv, [](size_t) { return std::nan(""); });
  } else {
    memset(recv, 0, row.counts.recv * element);
  }
  char* input = in_place
                    ? recv + static_cast<size_t>(context.rank) * row.counts.send_in_place * element
                    : context.buffers.send.get();
  const ValuePattern& pattern = row.pattern;
  const int rank = context.rank;
  fill_buffer(row.type.type, input, row.counts.send,
              [&](size_t index) { return pattern.input(rank, index); });
}

int64_t count_row_wrong(const RankContext& context, const RowCase& row, bool in_place) {
  const size_t offset =
      in_place ? static_cast<size_t>(context.rank) * row.counts.recv_in_place * row.type.bytes : 0;
  const CheckContext check{row.pattern, context.rank, context.nranks,
                           row.root,    in_place,     row.counts};
  const auto expected = context.test.expected;
  return count_wrong(row.type.type, context.buffers.recv.get() + offset, row.counts.recv,
                     [&](size_t index) { return expected(check, index); });
}

}  // namespace perf
}  // namespace terse
