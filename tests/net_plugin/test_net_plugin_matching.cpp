// NCCL's matching rules through the v11 table: many requests in flight, grouped receives matched
// by tag, receive buffers larger than the message, a listen comm accepting twice, closes with
// requests outstanding, and bad arguments refused with a result code.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "net_test_support.h"
#include "plugin/net/net_wire.h"

namespace terse::test {
namespace {

LoadedNet& net() {
  return net_for_version(11);
}

// A generous bound on a wait that only turns a hang into a failure.
bool in_time(std::chrono::steady_clock::time_point start) {
  return std::chrono::steady_clock::now() < start + std::chrono::seconds(120);
}

TEST(NetPluginMatching, ThirtyTwoRequestsInFlightEachWay) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Traffic traffic;
  for (int i = 0; i < 600; ++i) traffic.sizes.push_back(1 + (i * 7919) % 70000);
  traffic.in_flight = 32;
  EXPECT_EQ(drive(net(), pair.send, pair.recv, traffic), "");
  EXPECT_EQ(close_pair(net(), &pair), "");
}

TEST(NetPluginMatching, ReceiveBuffersLargerThanTheMessages) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Traffic traffic;
  traffic.sizes = sizes_up_to(1 << 20);
  traffic.receive_slack = 4099;  // test() reports the sent size; nothing lands past it
  EXPECT_EQ(drive(net(), pair.send, pair.recv, traffic), "");
  EXPECT_EQ(close_pair(net(), &pair), "");
}

// One irecv of four buffers with four tags; the sends come in another order and each lands in
// the buffer of its tag, with its own size reported. A second group follows on the same comm.
TEST(NetPluginMatching, GroupedReceivesMatchByTag) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  for (int round = 0; round < 2; ++round) {
    constexpr int kCount = 4;
    int tags[kCount] = {10, 11, 12, 13};
    size_t capacity[kCount] = {1000, 70000, 5, 300000};
    size_t sent_size[kCount] = {999, 65536, 0, 299999};
    std::vector<std::vector<uint8_t>> in(kCount), out(kCount);
    void* data[kCount];
    void* recv_handles[kCount];
    for (int i = 0; i < kCount; ++i) {
      in[i].assign(capacity[i], 0);
      data[i] = in[i].data();
      ASSERT_EQ(net().reg_mr(pair.recv, data[i], capacity[i], netabi::kPtrHost, &recv_handles[i]),
                ncclSuccess);
      out[i].resize(sent_size[i]);
      fill_message(100 * round + i, sent_size[i], false, out[i].data());
    }
    void* receive = nullptr;
    ASSERT_EQ(net().irecv(pair.recv, kCount, data, capacity, tags, recv_handles, &receive),
              ncclSuccess);
    ASSERT_NE(receive, nullptr);
    void* sends[kCount] = {};
    void* send_handles[kCount];
    int order[kCount] = {3, 1, 2, 0};
    for (int k = 0; k < kCount; ++k) {
      int i = order[k];
      ASSERT_EQ(
          net().reg_mr(pair.send, out[i].data(), out[i].size(), netabi::kPtrHost, &send_handles[i]),
          ncclSuccess);
      // While a send waits for its clear-to-send, the receive is tested too, as NCCL's proxy
      // tests its posted receives between retries: over TCP the receiver's clear-to-send leaves
      // only when the receive comm's worker progresses.
      auto start = std::chrono::steady_clock::now();
      int receive_done = 0;
      while (sends[i] == nullptr && in_time(start)) {
        ASSERT_EQ(net().isend(pair.send, out[i].data(), out[i].size(), tags[i], send_handles[i],
                              &sends[i]),
                  ncclSuccess);
        if (sends[i] == nullptr) {
          ASSERT_EQ(net().test(receive, &receive_done, nullptr), ncclSuccess);
          ASSERT_EQ(receive_done, 0) << "the receive finished before its sends were posted";
        }
      }
      ASSERT_NE(sends[i], nullptr);
    }
    // One thread tests the receive and the sends in turns, as NCCL's proxy does: each side's
    // progress happens inside its own test calls.
    int done = 0;
    int sizes[kCount] = {-1, -1, -1, -1};
    int sends_done[kCount] = {};
    auto all_done = [&] {
      bool all = done != 0;
      for (int i = 0; i < kCount; ++i) all = all && sends_done[i];
      return all;
    };
    auto start = std::chrono::steady_clock::now();
    while (!all_done() && in_time(start)) {
      if (!done) {
        ASSERT_EQ(net().test(receive, &done, sizes), ncclSuccess);
      }
      for (int i = 0; i < kCount; ++i) {
        if (!sends_done[i]) {
          ASSERT_EQ(net().test(sends[i], &sends_done[i], nullptr), ncclSuccess);
        }
      }
    }
    ASSERT_TRUE(all_done());
    for (int i = 0; i < kCount; ++i) {
      EXPECT_EQ(sizes[i], static_cast<int>(sent_size[i])) << "tag " << tags[i];
      EXPECT_EQ(memcmp(in[i].data(), out[i].data(), sent_size[i]), 0) << "tag " << tags[i];
      EXPECT_EQ(net().dereg_mr(pair.send, send_handles[i]), ncclSuccess);
      EXPECT_EQ(net().dereg_mr(pair.recv, recv_handles[i]), ncclSuccess);
    }
  }
  EXPECT_EQ(close_pair(net(), &pair), "");
}

TEST(NetPluginMatching, OneListenCommAcceptsTwice) {
  CommPair first;
  ASSERT_EQ(open_pair(net(), &first), "");
  void* second_send = nullptr;
  void* second_recv = nullptr;
  ASSERT_EQ(connect_and_accept(net(), 0, first.handle, &second_send, first.listen, &second_recv),
            "");
  Traffic traffic;
  traffic.sizes = sizes_up_to(1 << 16);
  EXPECT_EQ(drive(net(), first.send, first.recv, traffic), "");
  EXPECT_EQ(drive(net(), second_send, second_recv, traffic), "");
  EXPECT_EQ(net().close_send(second_send), ncclSuccess);
  EXPECT_EQ(net().close_recv(second_recv), ncclSuccess);
  EXPECT_EQ(close_pair(net(), &first), "");
}

// Receives posted and sends waiting for them, then both comms closed: the closes return, and
// the plugin still works afterwards.
TEST(NetPluginMatching, CloseWithRequestsOutstanding) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  std::vector<uint8_t> in(1 << 20), out(1 << 20, 1);
  void* recv_handle = nullptr;
  void* send_handle = nullptr;
  ASSERT_EQ(net().reg_mr(pair.recv, in.data(), in.size(), netabi::kPtrHost, &recv_handle),
            ncclSuccess);
  ASSERT_EQ(net().reg_mr(pair.send, out.data(), out.size(), netabi::kPtrHost, &send_handle),
            ncclSuccess);
  int tag = 1;
  size_t size = in.size();
  void* data = in.data();
  for (int i = 0; i < 4; ++i) {
    void* request = nullptr;
    ASSERT_EQ(net().irecv(pair.recv, 1, &data, &size, &tag, &recv_handle, &request), ncclSuccess);
    ASSERT_NE(request, nullptr);
  }
  // A send under another tag finds no receive: it stays unposted (NCCL would retry it).
  void* request = nullptr;
  ASSERT_EQ(net().isend(pair.send, out.data(), out.size(), 2, send_handle, &request), ncclSuccess);
  EXPECT_EQ(request, nullptr);
  // One that matches is posted and left untested.
  ASSERT_EQ(net().isend(pair.send, out.data(), out.size(), 1, send_handle, &request), ncclSuccess);
  EXPECT_EQ(close_pair(net(), &pair), "");
  CommPair again;
  ASSERT_EQ(open_pair(net(), &again), "");
  Traffic traffic;
  traffic.sizes = {1, 4096, 1 << 20};
  EXPECT_EQ(drive(net(), again.send, again.recv, traffic), "");
  EXPECT_EQ(close_pair(net(), &again), "");
}

// A handle whose listen comm is gone: connect fails (refused) instead of being called forever.
TEST(NetPluginMatching, ConnectToAClosedListenCommFails) {
  unsigned char handle[netabi::kHandleMaxBytes] = {};
  void* listen = nullptr;
  ASSERT_EQ(net().listen(0, handle, &listen), ncclSuccess);
  ASSERT_EQ(net().close_listen(listen), ncclSuccess);
  void* send = nullptr;
  ncclResult_t result = ncclSuccess;
  auto start = std::chrono::steady_clock::now();
  while (result == ncclSuccess && send == nullptr && in_time(start)) {
    result = net().connect(0, handle, &send);
  }
  EXPECT_EQ(send, nullptr);
  EXPECT_EQ(result, ncclRemoteError);
}

TEST(NetPluginMatching, BadArgumentsAreRefusedWithACode) {
  CommPair pair;
  // No eager sends, so that the send larger than its receive below is refused at isend (an
  // eager one fails the receive instead: test_net_plugin_eager.cpp).
  setenv("TERSE_NET_EAGER_BYTES", "0", 1);
  std::string opened = open_pair(net(), &pair);
  unsetenv("TERSE_NET_EAGER_BYTES");
  ASSERT_EQ(opened, "");
  std::vector<uint8_t> small(100), big(200);
  void* small_handle = nullptr;
  void* big_handle = nullptr;
  void* request = nullptr;
  int bogus = 0;
  EXPECT_EQ(net().reg_mr(pair.recv, small.data(), small.size(), netabi::kPtrCuda, &small_handle),
            ncclInvalidArgument);
  EXPECT_EQ(net().reg_mr(&bogus, small.data(), small.size(), netabi::kPtrHost, &small_handle),
            ncclInvalidArgument);
  ASSERT_EQ(net().reg_mr(pair.recv, small.data(), small.size(), netabi::kPtrHost, &small_handle),
            ncclSuccess);
  ASSERT_EQ(net().reg_mr(pair.send, big.data(), big.size(), netabi::kPtrHost, &big_handle),
            ncclSuccess);
  EXPECT_EQ(net().isend(&bogus, big.data(), big.size(), 1, big_handle, &request),
            ncclInvalidArgument);
  EXPECT_EQ(net().isend(pair.recv, big.data(), big.size(), 1, big_handle, &request),
            ncclInvalidArgument);
  EXPECT_EQ(net().test(&bogus, &bogus, nullptr), ncclInvalidArgument);
  // A buffer outside its registration.
  EXPECT_EQ(net().isend(pair.send, big.data() + 150, 100, 1, big_handle, &request),
            ncclInvalidArgument);
  void* data = small.data();
  size_t size = small.size();
  int tags[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(net().irecv(pair.recv, 0, &data, &size, tags, &small_handle, &request),
            ncclInvalidArgument);
  std::vector<void*> datas(9, small.data());
  std::vector<size_t> sizes(9, 1);
  std::vector<void*> handles(9, small_handle);
  EXPECT_EQ(net().irecv(pair.recv, 9, datas.data(), sizes.data(), tags, handles.data(), &request),
            ncclInvalidArgument);
  // A send larger than the receive posted for it.
  ASSERT_EQ(net().irecv(pair.recv, 1, &data, &size, tags, &small_handle, &request), ncclSuccess);
  ncclResult_t result = ncclSuccess;
  void* send_request = nullptr;
  auto start = std::chrono::steady_clock::now();
  int receive_done = 0;
  while (result == ncclSuccess && !send_request && in_time(start)) {
    result = net().isend(pair.send, big.data(), big.size(), 1, big_handle, &send_request);
    // The receive comm progresses too (its clear-to-send leaves over TCP only then), as NCCL's
    // proxy tests its posted receives between a send's retries.
    if (result == ncclSuccess && !send_request) {
      ASSERT_EQ(net().test(request, &receive_done, nullptr), ncclSuccess);
    }
  }
  EXPECT_EQ(result, ncclInvalidUsage);
  unsigned char garbage[netabi::kHandleMaxBytes] = {1, 2, 3};
  void* send = nullptr;
  EXPECT_EQ(net().connect(0, garbage, &send), ncclInvalidArgument);
  EXPECT_EQ(net().connect(99, pair.handle, &send), ncclInvalidArgument);
  // A valid handle whose connect-progress field holds a pointer this process never made.
  unsigned char forged[netabi::kHandleMaxBytes];
  memcpy(forged, pair.handle, sizeof(forged));
  void* bogus_stage = &bogus;
  memcpy(forged + offsetof(net::ListenHandle, stage), &bogus_stage, sizeof(bogus_stage));
  EXPECT_EQ(net().connect(0, forged, &send), ncclInvalidArgument);
  EXPECT_EQ(net().dereg_mr(pair.send, &bogus), ncclInvalidArgument);
  EXPECT_EQ(net().close_send(pair.recv), ncclInvalidArgument);
  EXPECT_EQ(net().close_listen(&bogus), ncclInvalidArgument);
  EXPECT_EQ(close_pair(net(), &pair), "");
}

}  // namespace
}  // namespace terse::test
