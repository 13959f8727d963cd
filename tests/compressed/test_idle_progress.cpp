// A rank that returns from a call and then makes no calls for a while must not stall its peers.
// A UCX rendezvous send finishes only once the receiver's worker has sent its last protocol
// message, which can need progress on the receiver after its receive is complete (messages that
// arrived before their receive was posted, as a pipelined ring's do). The test harness joins its
// rank threads after every call, so a rank whose receives are done sits idle while its
// predecessor's last sends wait: without the transport's idle progress thread
// (transport/idle_progress.h) those sends reach their deadline and fail. This is what made a
// whole run of compressed_tests fail once; forcing rendezvous for every message
// (UCX_RNDV_THRESH) makes it certain.
#include <gtest/gtest.h>

#include <string>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "communicator_test_support.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

TEST(IdleProgress, PipelinedRingCallsWithForcedRendezvousAllFinish) {
  test::EnvironmentSettings settings(
      {{std::string("UCX_RNDV_THRESH"), "1024"}, {std::string("TERSE_TIMEOUT_S"), "5"}});
  test::CompressedRanks ranks(4, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4096);
  const CompressedAlgorithmInfo& ring = *find_compressed_algorithm("ring");
  for (uint64_t call = 0; call < 4; ++call) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      test::run_and_check(ranks, ring, dtype, 100003, call);
    }
  }
}

}  // namespace
}  // namespace terse
