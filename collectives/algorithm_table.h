// Every collective algorithm, listed once: {id, name, collective, description, run}. Selection,
// TERSE_ALGO and `--help` texts all read this table (docs/design.md section 5, after UCC's
// algorithm tables), so an algorithm is added by adding its row in algorithm_table.cpp.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective_args.h"

namespace terse {

using AlgorithmFunction = ncclResult_t (*)(const CollectiveArgs& args,
                                           const AlgorithmContext& context);

struct AlgorithmInfo {
  int id;                   // stable number, for logs and statistics
  const char* name;         // as written in TERSE_ALGO, e.g. "ring"
  CollectiveKind kind;      // the collective it implements
  const char* description;  // one line: what it is and when it wins
  AlgorithmFunction run;
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

}  // namespace terse
