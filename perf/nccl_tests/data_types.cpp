#include "perf/nccl_tests/data_types.h"

#include <cmath>
#include <cstdlib>

namespace terse {
namespace perf {
namespace {

constexpr double kExactCap = 1 << 20;

}  // namespace

const std::vector<DataTypeInfo>& data_types() {
  static const std::vector<DataTypeInfo> table = {
      {ncclInt8, "int8", 1, false, true, 127, 6, 0},
      {ncclUint8, "uint8", 1, false, false, 255, 7, 0},
      {ncclInt32, "int32", 4, false, true, kExactCap, 30, 0},
      {ncclUint32, "uint32", 4, false, false, kExactCap, 30, 0},
      {ncclInt64, "int64", 8, false, true, kExactCap, 30, 0},
      {ncclUint64, "uint64", 8, false, false, kExactCap, 30, 0},
      {ncclFloat16, "half", 2, true, true, 2048, 15, std::ldexp(1.0, -11)},
      {ncclFloat32, "float", 4, true, true, kExactCap, 30, std::ldexp(1.0, -24)},
      {ncclFloat64, "double", 8, true, true, kExactCap, 30, std::ldexp(1.0, -53)},
      {ncclBfloat16, "bfloat16", 2, true, true, 256, 30, std::ldexp(1.0, -8)},
      {ncclFloat8e4m3, "f8e4m3", 1, true, true, 16, 8, std::ldexp(1.0, -4)},
      {ncclFloat8e5m2, "f8e5m2", 1, true, true, 8, 15, std::ldexp(1.0, -3)},
  };
  return table;
}

const DataTypeInfo* find_data_type(const std::string& name) {
  for (const DataTypeInfo& info : data_types()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

const DataTypeInfo& data_type_info(ncclDataType_t type) {
  for (const DataTypeInfo& info : data_types()) {
    if (info.type == type) return info;
  }
  abort();  // every ncclDataType_t the binaries use is in the table
}

const std::vector<Reduction>& reductions() {
  static const std::vector<Reduction> all = {Reduction::kSum, Reduction::kProd, Reduction::kMax,
                                             Reduction::kMin, Reduction::kAvg,  Reduction::kMulSum};
  return all;
}

const char* reduction_name(Reduction op) {
  switch (op) {
    case Reduction::kSum:
      return "sum";
    case Reduction::kProd:
      return "prod";
    case Reduction::kMax:
      return "max";
    case Reduction::kMin:
      return "min";
    case Reduction::kAvg:
      return "avg";
    case Reduction::kMulSum:
      return "mulsum";
    case Reduction::kNone:
      return "none";
  }
  return "none";
}

bool find_reduction(const std::string& name, Reduction* op) {
  for (Reduction candidate : reductions()) {
    if (name == reduction_name(candidate)) {
      *op = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace perf
}  // namespace terse
