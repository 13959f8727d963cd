#include "codecs/dtype.h"

namespace terse {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat16:
      return "half";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3:
      return "float8e4m3";
    case DType::kFloat8E5M2:
      return "float8e5m2";
  }
  return "unknown";
}

bool dtype_from_nccl(ncclDataType_t type, DType* dtype) {
  switch (type) {
    case ncclFloat32:
      *dtype = DType::kFloat32;
      return true;
    case ncclFloat16:
      *dtype = DType::kFloat16;
      return true;
    case ncclBfloat16:
      *dtype = DType::kBFloat16;
      return true;
    case ncclFloat8e4m3:
      *dtype = DType::kFloat8E4M3;
      return true;
    case ncclFloat8e5m2:
      *dtype = DType::kFloat8E5M2;
      return true;
    default:
      return false;
  }
}

}  // namespace terse
