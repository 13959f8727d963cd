// Every version's table (v11, v10, v9, v8) as NCCL finds it: the name NCCL_NET selects, init,
// devices and properties, then traffic through that version's own signatures.
#include <thread>

#include "net_test_support.h"

namespace terse::test {
namespace {

class NetPluginVersion : public ::testing::TestWithParam<int> {};

TEST_P(NetPluginVersion, TableNameDevicesAndProperties) {
  LoadedNet& net = net_for_version(GetParam());
  EXPECT_STREQ(net.name(), "terse");
  int count = 0;
  ASSERT_EQ(net.devices(&count), ncclSuccess);
  ASSERT_GE(count, 1);
  for (int dev = 0; dev < count; ++dev) {
    NetProperties props;
    ASSERT_EQ(net.properties(dev, &props), ncclSuccess);
    EXPECT_FALSE(props.name.empty());
    EXPECT_EQ(props.ptr_support, netabi::kPtrHost);  // UCX's CUDA support is not used yet
    EXPECT_GT(props.speed, 0);
    EXPECT_GT(props.max_recvs, 1);  // grouped receives
    EXPECT_GT(props.max_comms, 0);
    if (GetParam() >= 9) {
      EXPECT_GE(props.max_p2p_bytes, size_t{64} << 20);
      EXPECT_EQ(props.vdevice_count, 1);
    }
  }
  NetProperties props;
  EXPECT_EQ(net.properties(count, &props), ncclInvalidArgument);
}

// Sender and receiver on two threads, every size from 1 B, 8 requests in flight each way.
TEST_P(NetPluginVersion, AllSizesBetweenTwoThreads) {
  LoadedNet& net = net_for_version(GetParam());
  unsigned char handle[netabi::kHandleMaxBytes] = {};
  void* listen = nullptr;
  ASSERT_EQ(net.listen(0, handle, &listen), ncclSuccess);
  Traffic traffic;
  // The full range once (v11, what NCCL 2.28 uses); up to 4 MiB through the older tables.
  traffic.sizes = sizes_up_to(GetParam() == 11 ? size_t{64} << 20 : size_t{4} << 20);
  std::string sender_error, receiver_error;
  void* send = nullptr;
  void* recv = nullptr;
  std::thread sender([&] {
    sender_error = connect_and_accept(net, 0, handle, &send, nullptr, nullptr);
    if (sender_error.empty()) sender_error = drive(net, send, nullptr, traffic);
  });
  std::thread receiver([&] {
    receiver_error = connect_and_accept(net, 0, nullptr, nullptr, listen, &recv);
    if (receiver_error.empty()) receiver_error = drive(net, nullptr, recv, traffic);
  });
  sender.join();
  receiver.join();
  EXPECT_EQ(sender_error, "");
  EXPECT_EQ(receiver_error, "");
  if (send) {
    EXPECT_EQ(net.close_send(send), ncclSuccess);
  }
  if (recv) {
    EXPECT_EQ(net.close_recv(recv), ncclSuccess);
  }
  EXPECT_EQ(net.close_listen(listen), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Tables, NetPluginVersion, ::testing::Values(11, 10, 9, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "v" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace terse::test
