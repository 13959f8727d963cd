// Every collective algorithm, listed once: {id, name, collective, description, run, cost,
// default size range}. Selection, TERSE_ALGO, the planner's predictions and `--help` texts all
// read this table (docs/design.md section 5, after UCC's algorithm tables), so an algorithm is
// added by adding its file and its row in algorithm_table.cpp.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective_args.h"
#include "collectives/cost_model.h"

namespace terse {

using AlgorithmFunction = ncclResult_t (*)(const CollectiveArgs& args,
                                           const AlgorithmContext& context);

struct AlgorithmInfo {
  int id;                   // stable number, for logs and statistics
  const char* name;         // as written in TERSE_ALGO, e.g. "ring"
  CollectiveKind kind;      // the collective it implements
  const char* description;  // one line: what it is and when it wins
  AlgorithmFunction run;
  // Its time on a group (cost_model.h), for the planner and ncclGroupSimulateEnd.
  CostFunction cost;
  // Default selection (algorithm_selection.h): among the rows of `kind`, in table order, the
  // first whose [default_min_bytes, default_max_bytes) holds the call's size is chosen; when
  // none does, the first row of the kind. The size is the message (count * type size, count as
  // CollectiveArgs counts it), or with `per_rank_bounds` the message divided by the rank count:
  // each rank's share, which is what an algorithm that splits the buffer puts in one message.
  // Rows that leave both bounds out match every size. Every rank must see the same table and
  // sizes, so every rank chooses alike.
  size_t default_min_bytes = 0;
  size_t default_max_bytes = SIZE_MAX;
  bool per_rank_bounds = false;
};

// Every algorithm, in a stable order.
const std::vector<AlgorithmInfo>& algorithm_table();

// The algorithm for `kind` named `name`, or null.
const AlgorithmInfo* find_algorithm(CollectiveKind kind, const std::string& name);

// The default algorithm for a call of `kind` moving `bytes` on `nranks` ranks: the first row of
// the kind whose default byte range holds the size, else the first row of the kind; null when
// no row implements the kind.
const AlgorithmInfo* default_algorithm(CollectiveKind kind, size_t bytes, int nranks);

// `algorithm`'s predicted time for `query` (on one rank nothing moves: 0, except a send or
// receive to oneself, which still moves its message).
Prediction predict(const AlgorithmInfo& algorithm, const CostQuery& query);

}  // namespace terse
