// ncclRedOpCreatePreMulSum / ncclRedOpDestroy and the mapping of every ncclRedOp_t.
#include "plugin/reduction_ops.h"

#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "common/exception_guard.h"
#include "common/float_convert.h"
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/pointer_memory.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

namespace terse {
namespace {

// One element of `type` at `scalar`, as a double (exact for every type but 64-bit integers
// beyond 2^53).
double scalar_value(ncclDataType_t type, const void* scalar) {
  auto load = [scalar](auto zero) {
    decltype(zero) value;
    std::memcpy(&value, scalar, sizeof(value));
    return value;
  };
  switch (type) {
    case ncclInt8:
      return load(int8_t{});
    case ncclUint8:
      return load(uint8_t{});
    case ncclInt32:
      return load(int32_t{});
    case ncclUint32:
      return load(uint32_t{});
    case ncclInt64:
      return static_cast<double>(load(int64_t{}));
    case ncclUint64:
      return static_cast<double>(load(uint64_t{}));
    case ncclFloat16:
      return half_to_float(load(uint16_t{}));
    case ncclFloat32:
      return load(float{});
    case ncclFloat64:
      return load(double{});
    case ncclBfloat16:
      return bf16_to_float(load(uint16_t{}));
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 value;
      value.__x = load(uint8_t{});
      return static_cast<float>(value);
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 value;
      value.__x = load(uint8_t{});
      return static_cast<float>(value);
    }
    default:
      return 0.0;
  }
}

}  // namespace

double premul_scalar_value(ncclDataType_t type, const void* scalar) {
  return scalar_value(type, scalar);
}

ncclResult_t resolve_reduce_op(ncclComm* comm, int op, ncclDataType_t type, int nranks,
                               ReduceOp* out, const void** device_scalar) {
  *device_scalar = nullptr;
  ReduceOp result;
  switch (op) {
    case ncclSum:
      result.kind = ReduceKind::kSum;
      break;
    case ncclProd:
      result.kind = ReduceKind::kProd;
      break;
    case ncclMax:
      result.kind = ReduceKind::kMax;
      break;
    case ncclMin:
      result.kind = ReduceKind::kMin;
      break;
    case ncclAvg:
      result.kind = ReduceKind::kSum;
      result.average = true;
      if (nccl_type_is_float(type)) {
        result.scale_input = true;
        result.input_scale = 1.0 / nranks;
      } else {
        result.divide_result = true;
        result.result_divisor = nranks;
      }
      break;
    default: {
      std::lock_guard<std::mutex> lock(comm->ops_mutex);
      auto found = comm->dynamic_ops.find(op);
      if (found == comm->dynamic_ops.end()) {
        return fail(ncclInvalidArgument,
                    "op %d is neither a built-in ncclRedOp_t nor a live ncclRedOpCreatePreMulSum "
                    "operator of this communicator",
                    op);
      }
      const PreMulSumOp& premul = found->second;
      if (premul.type != type) {
        return fail(ncclInvalidArgument, "op %d was created for datatype %s, not %s", op,
                    nccl_type_name(premul.type), nccl_type_name(type));
      }
      result.kind = ReduceKind::kSum;
      result.scale_input = true;
      if (premul.scalar_on_device) {
        result.input_scale = 1.0;  // set from the staged scalar when the call runs
        *device_scalar = premul.scalar;
      } else {
        result.input_scale =
            premul.read_at_call ? scalar_value(premul.type, premul.scalar) : premul.immediate;
      }
    }
  }
  *out = result;
  return ncclSuccess;
}

}  // namespace terse

using terse::fail;

// ncclScalarHostImmediate: a host pointer, read now. ncclScalarDevice: read at every call made
// with the operator, as NCCL reads it while the collective runs: from the host when it is host
// memory; when it is device (or managed) memory, copied in stream order with the call's inputs,
// so such an operator needs device buffers.
TERSE_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                                ncclDataType_t datatype,
                                                ncclScalarResidence_t residence,
                                                ncclComm_t comm) try {
  TERSE_FORWARD_NESTED(ncclRedOpCreatePreMulSum, op, scalar, datatype, residence, comm);
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: comm is null");
  if (op == nullptr) return fail(ncclInvalidArgument, "op is null");
  if (scalar == nullptr) return fail(ncclInvalidArgument, "scalar is null");
  const int raw_type = static_cast<int>(datatype);
  if (raw_type < 0 || raw_type >= ncclNumTypes) {
    return fail(ncclInvalidArgument, "datatype %d is not an ncclDataType_t", raw_type);
  }
  const int raw_residence = static_cast<int>(residence);
  if (raw_residence != ncclScalarDevice && raw_residence != ncclScalarHostImmediate) {
    return fail(ncclInvalidArgument, "residence %d is not an ncclScalarResidence_t", raw_residence);
  }
  PreMulSumOp premul;
  premul.type = datatype;
  premul.read_at_call = residence == ncclScalarDevice;
  premul.scalar_on_device = terse::query_buffer_memory(scalar).kind != terse::BufferKind::kHost;
  premul.scalar = scalar;
  if (premul.scalar_on_device && !premul.read_at_call) {
    return fail(ncclInvalidArgument,
                "scalar %p is device memory, but residence is ncclScalarHostImmediate (a host "
                "pointer read now)",
                scalar);
  }
  if (!premul.scalar_on_device) premul.immediate = terse::scalar_value(datatype, scalar);
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  if (comm->next_dynamic_op == ncclMaxRedOp) {
    return fail(ncclInternalError, "every ncclRedOp_t value of this communicator is used");
  }
  // Wrap mode: the operator exists on both sides, since the policy sends some calls with it to
  // the real NCCL and some to terse (real_op maps it).
  ncclRedOp_t real_op = ncclSum;
  if (comm->real != nullptr) {
    TERSE_CHECK(terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclRedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum",
                         &real_op, scalar, datatype, residence, comm->real),
        "ncclRedOpCreatePreMulSum", comm->real));
  }
  const int value = comm->next_dynamic_op++;
  comm->dynamic_ops[value] = premul;
  if (comm->real != nullptr) comm->real_ops[value] = real_op;
  *op = static_cast<ncclRedOp_t>(value);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclRedOpCreatePreMulSum");
}
TERSE_PROFILER_ALIAS(ncclRedOpCreatePreMulSum)

TERSE_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) try {
  TERSE_FORWARD_NESTED(ncclRedOpDestroy, op, comm);
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is null");
  const int value = static_cast<int>(op);
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  if (comm->dynamic_ops.erase(value) == 0) {
    return fail(ncclInvalidArgument, "op %d is not a live ncclRedOpCreatePreMulSum operator",
                value);
  }
  const auto real_op = comm->real_ops.find(value);
  if (real_op != comm->real_ops.end()) {
    const ncclRedOp_t real_value = real_op->second;
    comm->real_ops.erase(real_op);
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclRedOpDestroy,
                                             "ncclRedOpDestroy", real_value, comm->real),
                            "ncclRedOpDestroy", comm->real);
  }
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclRedOpDestroy");
}
TERSE_PROFILER_ALIAS(ncclRedOpDestroy)
