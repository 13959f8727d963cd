// Every compressed allreduce algorithm, listed once (as algorithm_table.h lists the dense ones):
// {id, name, description, role, whether auto weighs it, which codecs it can run, how many lossy
// steps its result has been through, run, cost, stage sizing, default size range}. Selection,
// the planner, the cost model, TERSE_COMPRESSED_ALGO, the error bounds of tests and perf tools,
// and `--help` texts all read this table: adding an algorithm is its file plus its row.
//
// Choosing is the planner's (planner.h): it weighs, with each row's cost, the flat rows `auto`
// may choose (or the codec family's own row), flat, inside the composite rows (hierarchical,
// rail) where the nodes make those pay. default_compressed_algorithm below is the fixed rule
// that remains for calls made without a plan (a composite's inner choice when the caller names
// none, the test harness) and for the reference model: the first family row that accepts the
// codec (rows in the order below: PowerSGD, shared-seed Random-K, then sparse allgather for the
// other sparse codecs), else the flat row whose default size range holds the tensor's bytes
// (tree below kCompressedTreeMaxBytes, recursive doubling below
// kCompressedRecursiveDoublingMaxBytes, sra above).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/cost_model.h"

namespace terse {

// What a row is to the planner.
enum class CompressedRole {
  kFlat,       // runs on the whole group any codec it accepts
  kFamily,     // a codec family's own algorithm (low-rank, shared-seed Random-K, sparse): run
               // for every codec of the family it accepts, the first such row in table order
  kComposite,  // runs a flat algorithm (its inner one) inside a node-aware structure
};

// Size thresholds of the default choice for dense codecs (bytes of the uncompressed tensor).
constexpr size_t kCompressedTreeMaxBytes = size_t{16} << 10;
constexpr size_t kCompressedRecursiveDoublingMaxBytes = size_t{256} << 10;

struct CompressedAlgorithmInfo {
  int id;                   // stable number, for logs and statistics
  const char* name;         // as written in TERSE_COMPRESSED_ALGO, e.g. "sra"
  const char* description;  // one line: what it is and when it wins
  CompressedRole role;
  // Whether the planner weighs it when nothing is forced (flat rows: as a flat candidate and as
  // a composite's inner one; composite rows: where the nodes make it pay).
  bool automatic;
  // Whether it can run `codec` on a tensor of `count` elements (e.g. ring and sra need a
  // codec without per-tensor state, because they encode pieces and partial sums).
  bool (*accepts)(const Codec& codec, size_t count);
  // How many lossy encodes the result has been through at most, on a group of `ranks` ranks:
  // the k in the error bound S ((1 + c)^k - 1) of compressed_error_bound.h. 0 for one rank.
  int (*lossy_steps)(int ranks);
  CompressedAlgorithmFunction run;
  // Its time (compressed_cost.h), flat and family rows: on a group of two ranks or more.
  CostFunction cost = nullptr;
  // Composite rows: its time around the inner algorithm's cost.
  Prediction (*composite_cost)(CostFunction inner, const CostQuery& query) = nullptr;
  // Composite rows: whether its structure exists on a group of `shape` (`equal_nodes`: every
  // node holds as many ranks), so that the planner weighs it there.
  bool (*applies)(const GroupShape& shape, bool equal_nodes) = nullptr;
  // With memory `residual`: the fp32 elements of the second residual a rank keeps for a later
  // lossy stage (ResidualEntry::stage_residual; scatter-reduce-allgather's owner residual), for
  // `count` elements of `dtype` on `group`, composite rows around `inner` (null: the default
  // inner algorithm). The largest any rank of the group keeps, so that every rank asks residual
  // memory for the same bytes (EntryOptions::stage_count). Null: none.
  size_t (*stage_residual_elements)(const CompressedAlgorithmInfo* inner, const Codec& codec,
                                    size_t count, DType dtype, const PeerGroup& group) = nullptr;
  // Flat rows: the tensor sizes (bytes) for which it is the default choice for a dense codec.
  size_t default_min_bytes = 0;
  size_t default_max_bytes = 0;

  size_t stage_elements(const Codec& codec, size_t count, DType dtype, const PeerGroup& group,
                        const CompressedAlgorithmInfo* inner = nullptr) const {
    return stage_residual_elements ? stage_residual_elements(inner, codec, count, dtype, group) : 0;
  }
};

// Every compressed algorithm, in a stable order.
const std::vector<CompressedAlgorithmInfo>& compressed_algorithm_table();

// The algorithm named `name`, or null.
const CompressedAlgorithmInfo* find_compressed_algorithm(const std::string& name);

// Every name, comma-separated (messages, --help).
std::string compressed_algorithm_names();

// The default algorithm for `codec` on `count` elements of `element_bytes` (see the file
// comment); never null.
const CompressedAlgorithmInfo* default_compressed_algorithm(const Codec& codec, size_t count,
                                                            size_t element_bytes);

// `algorithm`'s predicted time for `query`, composite rows around `inner` (a flat row; without
// one a composite's time is infinite). On one rank: an encode and a decode of the tensor.
Prediction predict(const CompressedAlgorithmInfo& algorithm, const CostQuery& query,
                   const CompressedAlgorithmInfo* inner = nullptr);

}  // namespace terse
