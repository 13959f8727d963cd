// The datatypes and reduction operators the perf binaries know, under nccl-tests' names and in
// nccl-tests' order (what "-d all" and "-o all" run), with the numeric facts the value pattern
// and the tolerances are built from.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

namespace terse {
namespace perf {

struct DataTypeInfo {
  ncclDataType_t type;
  const char* name;  // nccl-tests' name: int8 ... f8e5m2
  size_t bytes;
  bool is_float;
  bool is_signed;
  // Every integer in [-exact_limit, exact_limit] ([0, exact_limit] unsigned) is exact in the
  // type, and so is every sum of such values that stays inside it. Capped at 2^20: the patterns
  // need no more, and 64-bit integers stay exact in the float64 reference.
  double exact_limit;
  // 2^max_power_of_two is exact and in range (products of the prod pattern), capped at 30.
  int max_power_of_two;
  // Half an ulp at 1 (round to nearest): 2^-11 half, 2^-8 bfloat16, 2^-4 f8e4m3, 2^-3 f8e5m2,
  // 2^-24 float, 2^-53 double; 0 for integers, whose results must be exact.
  double unit_roundoff;
};

// int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2.
const std::vector<DataTypeInfo>& data_types();
// nullptr when `name` is none of them.
const DataTypeInfo* find_data_type(const std::string& name);
const DataTypeInfo& data_type_info(ncclDataType_t type);

// kNone is what collectives that do not reduce run with (printed "none").
enum class Reduction { kSum, kProd, kMax, kMin, kAvg, kMulSum, kNone };

// sum prod max min avg mulsum: the built-in ncclRedOp_t values, then a PreMulSum operator
// (ncclRedOpCreatePreMulSum) made for each call with a per-rank scalar.
const std::vector<Reduction>& reductions();
const char* reduction_name(Reduction op);
// False when `name` is none of reductions().
bool find_reduction(const std::string& name, Reduction* op);

}  // namespace perf
}  // namespace terse
