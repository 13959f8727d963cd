#include "perf/nccl_tests/row_check.h"

#include <cmath>
#include <cstring>

#include "perf/nccl_tests/buffer_check.h"

namespace terse {
namespace perf {

void prepare_row_inputs(RankContext& context, const RowCase& row, bool in_place, bool nan_output) {
  const size_t element = row.type.bytes;
  char* recv = context.buffers.host_recv();
  if (nan_output) {
    fill_buffer(row.type.type, recv, row.counts.recv, [](size_t) { return std::nan(""); });
  } else {
    memset(recv, 0, row.counts.recv * element);
  }
  char* input = in_place
                    ? recv + static_cast<size_t>(context.rank) * row.counts.send_in_place * element
                    : context.buffers.host_send();
  const ValuePattern& pattern = row.pattern;
  const int rank = context.rank;
  fill_buffer(row.type.type, input, row.counts.send,
              [&](size_t index) { return pattern.input(rank, index); });
  context.buffers.copy_in(recv, row.counts.recv * element);
  context.buffers.copy_in(input, row.counts.send * element);
}

const char* checked_output(const RankContext& context, const RowCase& row, bool in_place) {
  const size_t offset =
      in_place ? static_cast<size_t>(context.rank) * row.counts.recv_in_place * row.type.bytes : 0;
  return context.buffers.copy_out(context.buffers.host_recv() + offset,
                                  row.counts.recv * row.type.bytes);
}

int64_t count_row_wrong(const RankContext& context, const RowCase& row, bool in_place) {
  const CheckContext check{row.pattern, context.rank, context.nranks,
                           row.root,    in_place,     row.counts};
  const auto expected = context.test.expected;
  return count_wrong(row.type.type, checked_output(context, row, in_place), row.counts.recv,
                     [&](size_t index) { return expected(check, index); });
}

}  // namespace perf
}  // namespace terse
