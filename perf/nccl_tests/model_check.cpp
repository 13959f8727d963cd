#include "perf/nccl_tests/model_check.h"

#include <terse/terse.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "codecs/dtype.h"
#include "common/text_hash.h"
#include "model/last_call.h"
#include "perf/nccl_tests/element_values.h"
#include "perf/nccl_tests/row_check.h"
#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {
namespace {

// What this rank says its node is, as a number the sync can sum exactly (52 bits).
int64_t host_number(const std::string& host) {
  return static_cast<int64_t>(fnv1a(host) >> 12);
}

std::string own_host() {
  const char* forced = getenv("TERSE_HOSTID");
  if (forced != nullptr && *forced != '\0') return forced;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

std::vector<std::string> gather_hosts(RankContext& context) {
  const int64_t mine = host_number(own_host());
  std::vector<std::string> hosts;
  for (int rank = 0; rank < context.nranks; ++rank) {
    hosts.push_back(std::to_string(context.sync.sum(rank == context.rank ? mine : 0)));
  }
  return hosts;
}

ModelFigures check_compressed_row(const RankContext& context, const RowCase& row, bool in_place,
                                  const std::vector<std::string>& hosts) {
  ModelFigures figures;
  const size_t count = row.counts.recv;
  const char* output = checked_output(context, row, in_place);
  DType dtype;
  terseStats stats{};
  TERSE_PERF_NCCL(terseCommGetStats(context.comm, &stats));
  std::unique_ptr<model::CompressedModel> reference =
      model::model_of_last_call(stats, context.nranks);
  if (!dtype_from_nccl(row.type.type, &dtype) || std::strcmp(stats.last_codec, "none") == 0 ||
      reference == nullptr) {
    figures.wrong = static_cast<int64_t>(count);  // not compressed, or a codec no model knows
    return figures;
  }
  std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(context.nranks));
  for (int rank = 0; rank < context.nranks; ++rank) {
    inputs[rank].resize(count * dtype_size(dtype));
    for (size_t i = 0; i < count; ++i) {
      terse::store_element(inputs[rank].data(), dtype, i,
                           static_cast<float>(row.pattern.input(rank, i)));
    }
  }
  model::CallSpec spec = model::spec_of_last_call(
      stats, dtype, count, row.op == Reduction::kAvg ? 1.0 / context.nranks : 1.0);
  spec.hosts = hosts;
  const model::Expected expected = reference->call(spec, inputs);
  const model::Comparison comparison =
      model::compare(expected, dtype, reinterpret_cast<const uint8_t*>(output), count);
  figures.wrong = static_cast<int64_t>(comparison.mismatches);
  double largest = 0, total = 0, worst = 0;
  for (size_t i = 0; i < count; ++i) {
    const double exact = row.pattern.reduced(i).value;
    const double error = std::fabs(load_element(row.type.type, output, i) - exact);
    largest = std::max(largest, std::fabs(exact));
    if (std::isfinite(error)) {
      worst = std::max(worst, error);
      total += error;
    }
  }
  const double scale = largest > 0 ? largest : 1.0;
  figures.max_rel_err = worst / scale;
  figures.mean_rel_err = count > 0 ? total / double(count) / scale : 0.0;
  return figures;
}

}  // namespace perf
}  // namespace terse
