// Where a call's buffers send it (plugin/buffer_placement.h): host path, device path, or a
// refusal naming the buffer. Pure rules, no GPU needed.
#include "plugin/buffer_placement.h"

#include <gtest/gtest.h>

#include <string>

namespace terse {
namespace {

using K = CollectiveKind;

const BufferMemory kHost{BufferKind::kHost, -1};
BufferMemory device(int id) {
  return {BufferKind::kDevice, id};
}
BufferMemory managed(int id) {
  return {BufferKind::kManaged, id};
}

TEST(BuffersUsed, FollowNcclsRootRules) {
  EXPECT_TRUE(buffers_used(K::kAllReduce, 1, 0).send && buffers_used(K::kAllReduce, 1, 0).recv);
  // Broadcast and scatter read sendbuff only at the root.
  EXPECT_TRUE(buffers_used(K::kBroadcast, 0, 0).send);
  EXPECT_FALSE(buffers_used(K::kBroadcast, 1, 0).send);
  EXPECT_TRUE(buffers_used(K::kBroadcast, 1, 0).recv);
  EXPECT_FALSE(buffers_used(K::kScatter, 2, 1).send);
  // Reduce and gather write recvbuff only at the root.
  EXPECT_TRUE(buffers_used(K::kReduce, 3, 3).recv);
  EXPECT_FALSE(buffers_used(K::kReduce, 2, 3).recv);
  EXPECT_FALSE(buffers_used(K::kGather, 0, 1).recv);
  EXPECT_TRUE(buffers_used(K::kGather, 0, 1).send);
  // Send has no recvbuff, recv no sendbuff.
  EXPECT_FALSE(buffers_used(K::kSend, 0, 0).recv);
  EXPECT_FALSE(buffers_used(K::kRecv, 0, 0).send);
}

TEST(BufferBytes, BlocksPerBufferAsNcclCountsThem) {
  CollectiveArgs args;
  args.count = 10;
  args.type = ncclFloat64;  // 8 bytes
  args.kind = K::kAllGather;
  EXPECT_EQ(buffer_bytes(args, 0, 4).send, 80u);
  EXPECT_EQ(buffer_bytes(args, 0, 4).recv, 320u);
  args.kind = K::kReduceScatter;
  EXPECT_EQ(buffer_bytes(args, 0, 4).send, 320u);
  EXPECT_EQ(buffer_bytes(args, 0, 4).recv, 80u);
  args.kind = K::kAllToAll;
  EXPECT_EQ(buffer_bytes(args, 0, 3).send, 240u);
  EXPECT_EQ(buffer_bytes(args, 0, 3).recv, 240u);
  args.kind = K::kGather;
  args.root = 1;
  EXPECT_EQ(buffer_bytes(args, 1, 3).recv, 240u);
  EXPECT_EQ(buffer_bytes(args, 0, 3).recv, 0u);  // not the root: recvbuff unused
  args.kind = K::kBroadcast;
  EXPECT_EQ(buffer_bytes(args, 0, 3).send, 0u);
  EXPECT_EQ(buffer_bytes(args, 0, 3).recv, 80u);
  args.count = 0;
  args.kind = K::kAllReduce;
  EXPECT_EQ(buffer_bytes(args, 0, 3).send, 0u);
  EXPECT_EQ(buffer_bytes(args, 0, 3).recv, 0u);
}

TEST(ChoosePath, HostBuffersTakeTheHostPathUnchanged) {
  const PathChoice choice = choose_path({true, true}, kHost, kHost, 0);
  EXPECT_EQ(choice.path, CallPath::kHost);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kNone);
  // Also without any CUDA device on the communicator.
  EXPECT_EQ(choose_path({true, true}, kHost, kHost, -1).path, CallPath::kHost);
  // Nothing used (count 0): host path, whatever the pointers are.
  EXPECT_EQ(choose_path({false, false}, device(3), device(5), 0).path, CallPath::kHost);
}

TEST(ChoosePath, DeviceAndManagedBuffersAreStaged) {
  EXPECT_EQ(choose_path({true, true}, device(1), device(1), 1).path, CallPath::kDevice);
  EXPECT_EQ(choose_path({true, true}, managed(0), device(1), 1).path, CallPath::kDevice);
  // Managed memory of another device is reachable from any device.
  EXPECT_EQ(choose_path({true, true}, managed(0), managed(0), 1).path, CallPath::kDevice);
  // Only the used buffer counts: a non-root broadcast's sendbuff may be anything.
  EXPECT_EQ(choose_path({false, true}, kHost, device(0), 0).path, CallPath::kDevice);
  EXPECT_EQ(choose_path({true, false}, device(0), kHost, 0).path, CallPath::kDevice);
}

TEST(ChoosePath, MixedHostAndDeviceIsRefusedNamingTheHostBuffer) {
  PathChoice choice = choose_path({true, true}, kHost, device(0), 0);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kMixed);
  EXPECT_STREQ(choice.argument, "sendbuff");
  choice = choose_path({true, true}, managed(0), kHost, 0);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kMixed);
  EXPECT_STREQ(choice.argument, "recvbuff");
}

TEST(ChoosePath, DeviceMemoryOfAnotherDeviceIsRefused) {
  PathChoice choice = choose_path({true, true}, device(0), device(1), 0);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kOtherDevice);
  EXPECT_STREQ(choice.argument, "recvbuff");
  choice = choose_path({true, true}, device(2), device(2), 0);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kOtherDevice);
  EXPECT_STREQ(choice.argument, "sendbuff");
}

TEST(ChoosePath, DeviceMemoryWithoutACommunicatorDeviceIsRefused) {
  PathChoice choice = choose_path({true, true}, device(0), device(0), -1);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kNoDevice);
  EXPECT_STREQ(choice.argument, "sendbuff");
  choice = choose_path({false, true}, kHost, managed(0), -1);
  EXPECT_EQ(choice.refusal, PlacementRefusal::kNoDevice);
  EXPECT_STREQ(choice.argument, "recvbuff");
}

TEST(MemoryKindName, ReadsInMessages) {
  EXPECT_EQ(std::string(buffer_kind_name(BufferKind::kManaged)), "managed memory");
  EXPECT_EQ(std::string(buffer_kind_name(BufferKind::kDevice)), "device memory");
}

}  // namespace
}  // namespace terse
