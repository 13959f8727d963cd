// Ranks that disagree about the call fail (never hang, never report success): a rank that
// passes a different count sees a message of the wrong size (ncclInvalidUsage) or, if the
// message it waits for never comes, its deadline (ncclRemoteError).
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "allreduce_test_support.h"
#include "collectives/allreduce_algorithms.h"
#include "common/result.h"

namespace terse {
namespace {

void expect_mismatch_fails(test::AllreduceFunction algorithm, int nranks, size_t piece_bytes) {
  const auto start = std::chrono::steady_clock::now();
  test::run_with_transports(nranks, [&](Transport& transport) {
    // Rank 0 has one element more than the others.
    const size_t count = 1001 + (transport.rank() == 0 ? 1 : 0);
    std::vector<float> data(count, 1.0f);
    CollectiveArgs args;
    args.send = data.data();
    args.recv = data.data();
    args.count = count;
    AlgorithmContext context{&transport, 1, Deadline::after_seconds(3), piece_bytes};
    const ncclResult_t result = algorithm(args, context);
    EXPECT_TRUE(result == ncclInvalidUsage || result == ncclRemoteError)
        << "rank " << transport.rank() << " returned " << result << ": " << last_error();
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
}

TEST(AllreduceErrors, RingRanksWithDifferentCountsFail) {
  expect_mismatch_fails(ring_allreduce, 3, kDefaultPieceBytes);
  expect_mismatch_fails(ring_allreduce, 2, 1024);
}

TEST(AllreduceErrors, RecursiveDoublingRanksWithDifferentCountsFail) {
  expect_mismatch_fails(recursive_doubling_allreduce, 2, kDefaultPieceBytes);
  expect_mismatch_fails(recursive_doubling_allreduce, 3, kDefaultPieceBytes);
}

}  // namespace
}  // namespace terse
