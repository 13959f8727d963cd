// The check of a compressed allreduce row: every element of this rank's output against the
// reference model of model/ (the same one the test suite trusts), which recomputes the call
// from what every rank knows: every rank's input (the value pattern), and the codec, algorithm,
// seed, tensor step and piece size the call ran with (terseCommGetStats). #wrong counts the
// elements that differ from the model (bit for bit, or beyond the rounding the model states for
// exact sums done in another order); an element the call never wrote (the output is filled with
// NaN first) or a zero result is always wrong. The relative errors say how far the result is from
// the exact float64 reduction: the codec's loss, not a pass/fail figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perf/nccl_tests/rank_context.h"

namespace terse {
namespace perf {

struct ModelFigures {
  int64_t wrong = 0;        // elements of this rank's output that differ from the model
  double max_rel_err = 0;   // max |result - exact| / max |exact|
  double mean_rel_err = 0;  // mean |result - exact| / max |exact|
};

// Each rank's node as terse groups them (TERSE_HOSTID, else the host name), gathered through the
// ranks' sync: a collective call, needed only when the last call ran hierarchically.
std::vector<std::string> gather_hosts(RankContext& context);

// After the checked call of `row` (the residual memory reset before it): this rank's output
// against the model. `hosts` as gather_hosts gives them, or empty for one node.
ModelFigures check_compressed_row(const RankContext& context, const RowCase& row, bool in_place,
                                  const std::vector<std::string>& hosts);

}  // namespace perf
}  // namespace terse
