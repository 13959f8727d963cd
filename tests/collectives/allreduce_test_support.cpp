#include "allreduce_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/result.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace test {
namespace {

constexpr int kMaxFailuresPerCase = 3;

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
