#include "allreduce_test_support.h"

#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "collectives/reduction.h"
#include "common/float_convert.h"
#include "common/result.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace test {
namespace {

constexpr double kPreMulSumFloatScalar = 0.75;
constexpr double kPreMulSumIntegerScalar = 2;
constexpr int kMaxFailuresPerCase = 3;

bool is_unsigned(ncclDataType_t type) {
  return type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
}
bool is_fp8(ncclDataType_t type) {
  return type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

// A well-mixed 32-bit hash of (rank, index), so that neighbouring elements and ranks differ.
uint32_t mix(int rank, size_t index) {
  uint64_t x =
      index * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

// Unit roundoff and half the smallest subnormal of a float type.
void rounding_of(ncclDataType_t type, double* unit, double* tiny) {
  switch (type) {
    case ncclFloat64:
      *unit = std::ldexp(1.0, -53), *tiny = std::ldexp(1.0, -1075);
      return;
    case ncclFloat32:
      *unit = std::ldexp(1.0, -24), *tiny = std::ldexp(1.0, -150);
      return;
    case ncclFloat16:
      *unit = std::ldexp(1.0, -11), *tiny = std::ldexp(1.0, -25);
      return;
    case ncclBfloat16:
      *unit = std::ldexp(1.0, -8), *tiny = std::ldexp(1.0, -134);
      return;
    case ncclFloat8e4m3:
      *unit = std::ldexp(1.0, -4), *tiny = std::ldexp(1.0, -10);
      return;
    case ncclFloat8e5m2:
      *unit = std::ldexp(1.0, -3), *tiny = std::ldexp(1.0, -17);
      return;
    default:
      *unit = 0, *tiny = 0;
  }
}

// Environment for the rank threads: bootstrap on IPv4 loopback, a fresh id per communicator
// and a deadline short enough that a hang fails the test instead of the suite. Restored after.
struct LoopbackEnvironment {
  ScopedEnv ifname{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id{"NCCL_COMM_ID", nullptr};
  std::optional<ScopedEnv> timeout;
  LoopbackEnvironment() {
    if (getenv("TERSE_TIMEOUT_S") == nullptr) timeout.emplace("TERSE_TIMEOUT_S", "30");
  }
};

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
  return hash;
}

}  // namespace

const char* test_op_name(TestOp op) {
  switch (op) {
    case TestOp::kSum:
      return "sum";
    case TestOp::kProd:
      return "prod";
    case TestOp::kMax:
      return "max";
    case TestOp::kMin:
      return "min";
    case TestOp::kAvg:
      return "avg";
    case TestOp::kPreMulSum:
      return "premulsum";
  }
  return "?";
}

const std::vector<ncclDataType_t>& all_types() {
  static const std::vector<ncclDataType_t> types = {
      ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
      ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}

const std::vector<TestOp>& all_ops() {
  static const std::vector<TestOp> ops = {TestOp::kSum, TestOp::kProd, TestOp::kMax,
                                          TestOp::kMin, TestOp::kAvg,  TestOp::kPreMulSum};
  return ops;
}

ReduceOp make_reduce_op(TestOp op, ncclDataType_t type, int nranks) {
  ReduceOp result;
  switch (op) {
    case TestOp::kSum:
      break;
    case TestOp::kProd:
      result.kind = ReduceKind::kProd;
      break;
    case TestOp::kMax:
      result.kind = ReduceKind::kMax;
      break;
    case TestOp::kMin:
      result.kind = ReduceKind::kMin;
      break;
    case TestOp::kAvg:
      if (nccl_type_is_float(type)) {
        result.scale_input = true;
        result.input_scale = 1.0 / nranks;
      } else {
        result.divide_result = true;
        result.result_divisor = nranks;
      }
      break;
    case TestOp::kPreMulSum:
      result.scale_input = true;
      result.input_scale =
          nccl_type_is_float(type) ? kPreMulSumFloatScalar : kPreMulSumIntegerScalar;
      break;
  }
  return result;
}

double input_value(ncclDataType_t type, TestOp op, int rank, size_t index) {
  const uint32_t h = mix(rank, index);
  if (op == TestOp::kProd) {
    // Powers of two with signs: every partial product is exact in every type. Only ranks 0..2
    // contribute factors other than +-1, so products stay within int8 at any rank count.
    double magnitude = 1;
    if (rank < 3 && h % 3 == 0) magnitude = 2;
    if (rank < 3 && h % 3 == 1 && nccl_type_is_float(type)) magnitude = 0.5;
    const bool negative = !is_unsigned(type) && (h >> 8) % 4 == 0;
    return negative ? -magnitude : magnitude;
  }
  // -7..7 (0..14 unsigned): sums of 8 ranks times 2 (PreMulSum) still fit int8 and uint8.
  const int k = static_cast<int>(h % 15) - (is_unsigned(type) ? 0 : 7);
  if (!nccl_type_is_float(type)) return k;
  // Halves are exact in fp8; thirds make the wider floats round on every addition.
  if (is_fp8(type)) return k * 0.5;
  uint64_t element = 0;
  store_element(type, &element, 0, k / 3.0);
  return load_element(type, &element, 0);
}

double load_element(ncclDataType_t type, const void* data, size_t index) {
  switch (type) {
    case ncclInt8:
      return static_cast<const int8_t*>(data)[index];
    case ncclUint8:
      return static_cast<const uint8_t*>(data)[index];
    case ncclInt32:
      return static_cast<const int32_t*>(data)[index];
    case ncclUint32:
      return static_cast<const uint32_t*>(data)[index];
    case ncclInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
    case ncclUint64:
      return static_cast<double>(static_cast<const uint64_t*>(data)[index]);
    case ncclFloat16:
      return half_to_float(static_cast<const uint16_t*>(data)[index]);
    case ncclFloat32:
      return static_cast<const float*>(data)[index];
    case ncclFloat64:
      return static_cast<const double*>(data)[index];
    case ncclBfloat16:
      return bf16_to_float(static_cast<const uint16_t*>(data)[index]);
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      __half_raw half = __nv_cvt_fp8_to_halfraw(static_cast<const uint8_t*>(data)[index],
                                                type == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2);
      return half_to_float(half.x);
    }
    default:
      return 0;
  }
}

void store_element(ncclDataType_t type, void* data, size_t index, double value) {
  switch (type) {
    case ncclInt8:
      static_cast<int8_t*>(data)[index] = static_cast<int8_t>(value);
      return;
    case ncclUint8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
    case ncclInt32:
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case ncclUint32:
      static_cast<uint32_t*>(data)[index] = static_cast<uint32_t>(value);
      return;
    case ncclInt64:
      static_cast<int64_t*>(data)[index] = static_cast<int64_t>(value);
      return;
    case ncclUint64:
      static_cast<uint64_t*>(data)[index] = static_cast<uint64_t>(value);
      return;
    case ncclFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_half(static_cast<float>(value));
      return;
    case ncclFloat32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case ncclFloat64:
      static_cast<double*>(data)[index] = value;
      return;
    case ncclBfloat16:
      static_cast<uint16_t*>(data)[index] = float_to_bf16(static_cast<float>(value));
      return;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      static_cast<uint8_t*>(data)[index] = __nv_cvt_double_to_fp8(
          value, __NV_SATFINITE, type == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2);
      return;
    default:
      return;
  }
}

Reference make_reference(ncclDataType_t type, TestOp op, int nranks, size_t count) {
  Reference reference;
  reference.value.resize(count);
  reference.tolerance.assign(count, 0.0);
  const ReduceOp reduce_op = make_reduce_op(op, type, nranks);
  const bool is_float = nccl_type_is_float(type);
  double unit = 0, tiny = 0;
  rounding_of(type, &unit, &tiny);
  const double relative_bound = nranks * unit * std::pow(1 + unit, nranks);
  for (size_t i = 0; i < count; ++i) {
    double result = 0, magnitude = 0;
    for (int rank = 0; rank < nranks; ++rank) {
      double x = input_value(type, op, rank, i);
      if (reduce_op.scale_input) x *= reduce_op.input_scale;
      magnitude += std::fabs(x);
      if (rank == 0) {
        result = x;
      } else if (op == TestOp::kProd) {
        result *= x;
      } else if (op == TestOp::kMax) {
        result = std::max(result, x);
      } else if (op == TestOp::kMin) {
        result = std::min(result, x);
      } else {
        result += x;
      }
    }
    // Sums of small integers are exact in double; the quotient truncates as C does.
    if (reduce_op.divide_result) result = std::trunc(result / reduce_op.result_divisor);
    reference.value[i] = result;
    const bool rounds = is_float && op != TestOp::kMax && op != TestOp::kMin && op != TestOp::kProd;
    if (rounds) {
      reference.tolerance[i] = relative_bound * magnitude + 2 * nranks * tiny;
    }
  }
  return reference;
}

std::string describe(const AllreduceCase& c) {
  return std::string(nccl_type_name(c.type)) + " " + test_op_name(c.op) + " count " +
         std::to_string(c.count) + (c.in_place ? " in place" : " out of place");
}

std::vector<AllreduceCase> full_matrix(const std::vector<size_t>& counts) {
  std::vector<AllreduceCase> cases;
  for (size_t count : counts) {
    for (ncclDataType_t type : all_types()) {
      for (TestOp op : all_ops()) {
        for (bool in_place : {false, true})
          cases.push_back(AllreduceCase{type, op, count, in_place});
      }
    }
  }
  return cases;
}

void run_with_transports(int nranks, const std::function<void(Transport&)>& body) {
  LoopbackEnvironment environment;
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), ncclSuccess) << last_error();
  run_ranks(nranks, [&](int rank) {
    std::unique_ptr<Transport> transport;
    ncclResult_t result = Transport::create(id, rank, nranks, &transport);
    ASSERT_EQ(result, ncclSuccess) << "rank " << rank << ": " << last_error();
    body(*transport);
  });
}

void run_allreduce_cases(AllreduceFunction algorithm, int nranks,
                         const std::vector<AllreduceCase>& cases, size_t piece_bytes) {
  // References once, on this thread: every rank checks against the same one.
  std::vector<Reference> references;
  for (const AllreduceCase& c : cases)
    references.push_back(make_reference(c.type, c.op, nranks, c.count));
  // hashes[case][rank]: the result's bytes, for the cross-rank identity check.
  std::vector<std::vector<uint64_t>> hashes(cases.size(), std::vector<uint64_t>(nranks, 0));

  run_with_transports(nranks, [&](Transport& transport) {
    const int rank = transport.rank();
    for (size_t index = 0; index < cases.size(); ++index) {
      const AllreduceCase& c = cases[index];
      const size_t element_bytes = nccl_type_size(c.type);
      // One extra element on each side catches writes out of bounds; the odd start offset keeps
      // the algorithms honest about alignment.
      std::vector<uint8_t> send_storage((c.count + 2) * element_bytes + 1, 0xA5);
      std::vector<uint8_t> recv_storage((c.count + 2) * element_bytes + 1, 0x5A);
      uint8_t* send = send_storage.data() + 1 + element_bytes;
      uint8_t* recv = recv_storage.data() + 1 + element_bytes;
      uint8_t* input = c.in_place ? recv : send;
      for (size_t i = 0; i < c.count; ++i)
        store_element(c.type, input, i, input_value(c.type, c.op, rank, i));

      CollectiveArgs args;
      args.send = input;
      args.recv = recv;
      args.count = c.count;
      args.type = c.type;
      args.op = make_reduce_op(c.op, c.type, nranks);
      AlgorithmContext context;
      context.transport = &transport;
      context.sequence = static_cast<uint32_t>(index + 1);
      context.deadline = transport.default_deadline();
      context.piece_bytes = piece_bytes;
      ncclResult_t result = algorithm(args, context);
      ASSERT_EQ(result, ncclSuccess)
          << "rank " << rank << ", " << describe(c) << ": " << last_error();

      int failures = 0;
      const Reference& reference = references[index];
      for (size_t i = 0; i < c.count && failures < kMaxFailuresPerCase; ++i) {
        const double got = load_element(c.type, recv, i);
        if (!(std::fabs(got - reference.value[i]) <= reference.tolerance[i])) {
          ++failures;
          ADD_FAILURE() << "rank " << rank << " of " << nranks << ", " << describe(c)
                        << ": element " << i << " is " << got << ", expected " << reference.value[i]
                        << " within " << reference.tolerance[i];
        }
      }
      const uint8_t guard = 0x5A;
      EXPECT_EQ(recv_storage[element_bytes], guard)
          << "rank " << rank << ", " << describe(c) << ": wrote before the buffer";
      EXPECT_EQ(recv_storage[1 + (c.count + 1) * element_bytes], guard)
          << "rank " << rank << ", " << describe(c) << ": wrote past the buffer";
      if (!c.in_place) {
        for (size_t i = 0; i < c.count && failures < kMaxFailuresPerCase; ++i) {
          if (load_element(c.type, send, i) != input_value(c.type, c.op, rank, i)) {
            ++failures;
            ADD_FAILURE() << "rank " << rank << ", " << describe(c) << ": the send buffer "
                          << "changed at element " << i;
          }
        }
      }
      hashes[index][rank] = fnv1a(recv, c.count * element_bytes);
    }
  });

  for (size_t index = 0; index < cases.size(); ++index) {
    for (int rank = 1; rank < nranks; ++rank) {
      EXPECT_EQ(hashes[index][rank], hashes[index][0])
          << describe(cases[index]) << ": rank " << rank << " holds different bits than rank 0";
    }
  }
}

}  // namespace test
}  // namespace terse
