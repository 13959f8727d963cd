// Every compressed allreduce algorithm, listed once (as algorithm_table.h lists the dense ones):
// {id, name, description, which codecs it can run, how many lossy steps its result has been
// through, run}. Selection, TERSE_COMPRESSED_ALGO, the error bounds of tests and perf tools, and
// `--help` texts all read this table.
//
// Choosing is the planner's (planner.h): it weighs the algorithms a codec's family runs, flat,
// rail-aligned and hierarchical, with the cost model. default_compressed_algorithm below is the
// fixed rule that remains for calls made without a plan (an algorithm's inner choice when the
// caller names none, the test harness) and for the reference model:
//   low-rank (powersgd)              powersgd
//   randomk with shared_seed=true    randomk (dense allreduce of the k shared positions)
//   other sparse codecs              sparse_allgather
//   dense codecs (casts, quantizers) tree below kCompressedTreeMaxBytes, recursive_doubling
//                                    below kCompressedRecursiveDoublingMaxBytes, sra above
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "collectives/compressed/compressed_args.h"

namespace terse {

struct CompressedAlgorithmInfo {
  int id;                   // stable number, for logs and statistics
  const char* name;         // as written in TERSE_COMPRESSED_ALGO, e.g. "sra"
  const char* description;  // one line: what it is and when it wins
  // Whether it can run `codec` on a tensor of `count` elements (e.g. ring and sra need a
  // codec without per-tensor state, because they encode pieces and partial sums).
  bool (*accepts)(const Codec& codec, size_t count);
  // How many lossy encodes the result has been through at most, on a group of `ranks` ranks:
  // the k in the error bound S ((1 + c)^k - 1) of compressed_error_bound.h. 0 for one rank.
  int (*lossy_steps)(int ranks);
  CompressedAlgorithmFunction run;
  // With memory `residual`: the fp32 elements of the second residual a rank keeps for a later
  // lossy stage (ResidualEntry::stage_residual; scatter-reduce-allgather's owner residual), for
  // `count` elements of `dtype` on `group`. The largest any rank of the group keeps, so that
  // every rank asks residual memory for the same bytes (EntryOptions::stage_count). Null: none.
  size_t (*stage_residual_elements)(const Codec& codec, size_t count, DType dtype,
                                    const PeerGroup& group) = nullptr;

  size_t stage_elements(const Codec& codec, size_t count, DType dtype,
                        const PeerGroup& group) const {
    return stage_residual_elements ? stage_residual_elements(codec, count, dtype, group) : 0;
  }
};

// Every compressed algorithm, in a stable order.
const std::vector<CompressedAlgorithmInfo>& compressed_algorithm_table();

// The algorithm named `name`, or null.
const CompressedAlgorithmInfo* find_compressed_algorithm(const std::string& name);

// Every name, comma-separated (messages, --help).
std::string compressed_algorithm_names();

// Size thresholds of the default choice for dense codecs (bytes of the uncompressed tensor).
constexpr size_t kCompressedTreeMaxBytes = size_t{16} << 10;
constexpr size_t kCompressedRecursiveDoublingMaxBytes = size_t{256} << 10;

// The default flat algorithm for `codec` on `count` elements of `element_bytes` (see the file
// comment); never null.
const CompressedAlgorithmInfo* default_compressed_algorithm(const Codec& codec, size_t count,
                                                            size_t element_bytes);

}  // namespace terse
