// Inputs that every rank can compute for every rank, and the float64 reference of their
// reduction with a stated error bound per element: what the multi-rank tests (threads and
// processes) check every reducing collective against. No GoogleTest here, so that rank
// processes can check their own results.
//
// Tolerances (what "correct" means per type):
//   - integer types: exact (inputs are small enough that nothing overflows; average is the
//     truncated integer quotient of the exact sum, as NCCL computes it).
//   - max, min (every type): exact; selection never rounds.
//   - prod: exact; the inputs are powers of two (and signs), so every partial product is
//     representable in every type.
//   - sum, average, PreMulSum on floats: each of the n contributions may be rounded once when
//     scaled, and each of the n - 1 combining steps rounds its fp32 (fp64 for double) result to
//     the type once, an error of at most u * |partial| + eta where u is the type's unit roundoff
//     and eta half its smallest subnormal. Every partial sum is at most S = sum |scaled inputs|
//     plus the error so far, which gives
//         |result - reference| <= n * u * S * (1 + u)^n + 2 * n * eta
//     with u = 2^-53 (double), 2^-24 (float), 2^-11 (half), 2^-8 (bfloat16), 2^-4 (e4m3),
//     2^-3 (e5m2). The bound holds for any order and tree of combination, so it serves every
//     algorithm. For the fp8 types it is loose at large n (it can exceed one input), so the
//     cross-rank identity check and the exact ops carry more weight there.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

#include "collectives/reduction.h"

namespace terse {
namespace test {

enum class TestOp { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

const char* test_op_name(TestOp op);

// Every ncclDataType_t and every op the API offers (average and PreMulSum as the plugin maps
// them onto ReduceOp).
const std::vector<ncclDataType_t>& all_types();
const std::vector<TestOp>& all_ops();

// The ReduceOp the plugin would build for `op` on `type` with `nranks` ranks (PreMulSum with
// scalar 0.75 on floats, 2 on integers).
ReduceOp make_reduce_op(TestOp op, ncclDataType_t type, int nranks);

// Element `index` of `rank`'s input, exactly representable in `type`.
double input_value(ncclDataType_t type, TestOp op, int rank, size_t index);

// Element conversions between a typed buffer and double (rounding to nearest even for floats).
double load_element(ncclDataType_t type, const void* data, size_t index);
void store_element(ncclDataType_t type, void* data, size_t index, double value);

// The float64 reference of the allreduce of every rank's input and the bound each element must
// meet (see the top of this file).
struct Reference {
  std::vector<double> value;
  std::vector<double> tolerance;
};
Reference make_reference(ncclDataType_t type, TestOp op, int nranks, size_t count);

}  // namespace test
}  // namespace terse
