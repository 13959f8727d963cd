// The staging layout of one call (plugin/staging_layout.h): separate regions out of place, one
// shared region laid out as on the device in place, and copies of exactly the used bytes.
#include "plugin/staging_layout.h"

#include <gtest/gtest.h>

namespace terse {
namespace {

TEST(StagingLayout, OutOfPlaceBuffersGetAlignedRegionsOfTheirOwn) {
  const uintptr_t send = 0x10000, recv = 0x90000;
  const StagingLayout layout = plan_staging(send, 1001, recv, 4004);
  EXPECT_EQ(layout.send_offset, 0u);
  EXPECT_EQ(layout.recv_offset, align_staging(1001));
  EXPECT_EQ(layout.recv_offset % kStagingAlignment, 0u);
  EXPECT_EQ(layout.bytes, align_staging(1001) + align_staging(4004));
  EXPECT_EQ(layout.input.device, send);
  EXPECT_EQ(layout.input.bytes, 1001u);
  EXPECT_EQ(layout.input.staging_offset, 0u);
  EXPECT_EQ(layout.output.device, recv);
  EXPECT_EQ(layout.output.bytes, 4004u);
  EXPECT_EQ(layout.output.staging_offset, layout.recv_offset);
}

TEST(StagingLayout, InPlaceSharesOneRegion) {
  const uintptr_t buffer = 0x20000;
  const StagingLayout layout = plan_staging(buffer, 400, buffer, 400);
  EXPECT_EQ(layout.send_offset, layout.recv_offset);
  EXPECT_EQ(layout.bytes, align_staging(400));
  EXPECT_EQ(layout.input.bytes, 400u);
  EXPECT_EQ(layout.output.bytes, 400u);
}

TEST(StagingLayout, InPlaceAllGatherKeepsTheRankOffset) {
  // Rank 2 of 4, 100 bytes each: sendbuff == recvbuff + 2 * 100.
  const uintptr_t recv = 0x30000;
  const StagingLayout layout = plan_staging(recv + 200, 100, recv, 400);
  EXPECT_EQ(layout.recv_offset, 0u);
  EXPECT_EQ(layout.send_offset, 200u);
  EXPECT_EQ(layout.bytes, align_staging(400));
  // Only the rank's own block is copied in; the whole output is copied out.
  EXPECT_EQ(layout.input.device, recv + 200);
  EXPECT_EQ(layout.input.staging_offset, 200u);
  EXPECT_EQ(layout.input.bytes, 100u);
  EXPECT_EQ(layout.output.staging_offset, 0u);
  EXPECT_EQ(layout.output.bytes, 400u);
}

TEST(StagingLayout, InPlaceReduceScatterKeepsTheRankOffset) {
  // Rank 1 of 3, 64 bytes each: recvbuff == sendbuff + 64.
  const uintptr_t send = 0x40000;
  const StagingLayout layout = plan_staging(send, 192, send + 64, 64);
  EXPECT_EQ(layout.send_offset, 0u);
  EXPECT_EQ(layout.recv_offset, 64u);
  EXPECT_EQ(layout.input.bytes, 192u);
  EXPECT_EQ(layout.output.device, send + 64);
  EXPECT_EQ(layout.output.staging_offset, 64u);
  EXPECT_EQ(layout.output.bytes, 64u);
}

TEST(StagingLayout, AdjacentBuffersDoNotOverlap) {
  const uintptr_t send = 0x50000;
  const StagingLayout layout = plan_staging(send, 256, send + 256, 256);
  EXPECT_EQ(layout.send_offset, 0u);
  EXPECT_EQ(layout.recv_offset, 256u);
  EXPECT_EQ(layout.bytes, 512u);
}

TEST(StagingLayout, UnusedBuffersNeitherTakeRoomNorCopy) {
  // A broadcast's non-root: only recvbuff.
  StagingLayout layout = plan_staging(0, 0, 0x60000, 300);
  EXPECT_EQ(layout.input.bytes, 0u);
  EXPECT_EQ(layout.output.bytes, 300u);
  EXPECT_EQ(layout.bytes, align_staging(300));
  // A send: only sendbuff.
  layout = plan_staging(0x70000, 12, 0, 0);
  EXPECT_EQ(layout.input.bytes, 12u);
  EXPECT_EQ(layout.output.bytes, 0u);
  EXPECT_EQ(layout.bytes, align_staging(12));
}

}  // namespace
}  // namespace terse
