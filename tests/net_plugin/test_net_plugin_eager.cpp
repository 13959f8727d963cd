// The eager path (TERSE_NET_EAGER_BYTES): small sends go before their receive is posted and must
// still land where NCCL's matching rules put them (receives in posting order, tags within a
// grouped receive, buffers larger than the message, each message's own size reported), beside
// rendezvous sends of the same comm that wait for their clear-to-send. Each case would fail if
// the receiver matched by arrival, if the threshold were off by one, or if the ordinals of eager
// and rendezvous messages drifted apart.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.h"

namespace terse::test {
namespace {

LoadedNet& net() {
  return net_for_version(11);
}

class EnvSetting {
 public:
  EnvSetting(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvSetting() { unsetenv(name_); }

 private:
  const char* name_;
};

bool in_time(std::chrono::steady_clock::time_point start) {
  return std::chrono::steady_clock::now() < start + std::chrono::seconds(60);
}

// A registered buffer: a message to send (its bytes from fill_message) or a receive. Its
// registration ends with its comm (closing a comm lets go of what it registered).
struct Buffer {
  std::vector<uint8_t> bytes;
  void* handle = nullptr;
  Buffer(void* comm, size_t size, size_t message_index, bool gradient = false) {
    bytes.resize(size);
    fill_message(message_index, size, gradient, bytes.data());
    EXPECT_EQ(net().reg_mr(comm, bytes.data(), size, netabi::kPtrHost, &handle), ncclSuccess);
  }
  Buffer(void* comm, size_t capacity) {
    bytes.assign(capacity, 0xee);
    EXPECT_EQ(net().reg_mr(comm, bytes.data(), capacity, netabi::kPtrHost, &handle), ncclSuccess);
  }
};

// One isend call: the request, or null when the plugin asks to be called again.
void* isend_once(void* comm, Buffer& message, int tag) {
  void* request = nullptr;
  EXPECT_EQ(
      net().isend(comm, message.bytes.data(), message.bytes.size(), tag, message.handle, &request),
      ncclSuccess);
  return request;
}

void* irecv(void* comm, std::vector<Buffer*> buffers, std::vector<int> tags) {
  std::vector<void*> data, handles;
  std::vector<size_t> sizes;
  for (Buffer* buffer : buffers) {
    data.push_back(buffer->bytes.data());
    sizes.push_back(buffer->bytes.size());
    handles.push_back(buffer->handle);
  }
  void* request = nullptr;
  EXPECT_EQ(net().irecv(comm, static_cast<int>(buffers.size()), data.data(), sizes.data(),
                        tags.data(), handles.data(), &request),
            ncclSuccess);
  EXPECT_NE(request, nullptr);
  return request;
}

// Tests every request in turns, as NCCL's one proxy thread does, until all are done; the sizes
// each reported, or an empty list when one failed or time ran out.
std::vector<std::vector<int>> test_all(std::vector<void*> requests) {
  std::vector<std::vector<int>> sizes(requests.size(), std::vector<int>(8, -1));
  std::vector<int> done(requests.size(), 0);
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      if (net().test(requests[i], &done[i], sizes[i].data()) != ncclSuccess) return {};
      all = all && done[i];
    }
    if (all) return sizes;
    if (!in_time(start)) return {};
  }
}

// The requests in flight, tested in turns while a send is retried, as NCCL's one proxy thread
// does: a comm's worker moves only inside its own calls, so over TCP a receive's clear-to-send
// leaves only when that receive is tested.
class Proxy {
 public:
  size_t add(void* request) {
    EXPECT_NE(request, nullptr);
    requests_.push_back(request);
    done_.push_back(0);
    sizes_.emplace_back(8, -1);
    return requests_.size() - 1;
  }
  // Tests each unfinished request once; false when one failed.
  bool step() {
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (!done_[i] && net().test(requests_[i], &done_[i], sizes_[i].data()) != ncclSuccess) {
        return false;
      }
    }
    return true;
  }
  // Retries the send until posted, stepping the others between tries; its index.
  size_t isend_until_posted(void* comm, Buffer& message, int tag) {
    void* request = nullptr;
    auto start = std::chrono::steady_clock::now();
    while (request == nullptr && in_time(start)) {
      request = isend_once(comm, message, tag);
      if (request == nullptr) {
        EXPECT_TRUE(step());
      }
    }
    EXPECT_NE(request, nullptr) << "a send of " << message.bytes.size() << " bytes never posted";
    return add(request);
  }
  // Steps until everything is done; false on a failure or after a minute.
  bool finish() {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (!step()) return false;
      bool all = true;
      for (int flag : done_) all = all && flag;
      if (all) return true;
      if (!in_time(start)) return false;
    }
  }
  const std::vector<int>& sizes(size_t index) const { return sizes_[index]; }

 private:
  std::vector<void*> requests_;
  std::vector<int> done_;
  std::vector<std::vector<int>> sizes_;
};

bool same_prefix(const Buffer& received, const Buffer& sent) {
  return received.bytes.size() >= sent.bytes.size() &&
         memcmp(received.bytes.data(), sent.bytes.data(), sent.bytes.size()) == 0;
}

// Sizes at the threshold and one either side: those up to it go at once (a request before any
// receive is posted), the one above waits for its clear-to-send. Then the receives, larger than
// the messages, in another order than the sends' tags: each message lands by (tag, order).
TEST(NetPluginEager, SmallSendsGoBeforeTheirReceiveAndMatchByTagAndOrder) {
  for (const char* threshold : {"1000", "16384"}) {
    EnvSetting eager("TERSE_NET_EAGER_BYTES", threshold);
    size_t limit = std::stoul(threshold);
    CommPair pair;
    ASSERT_EQ(open_pair(net(), &pair), "");
    Buffer first(pair.send, 1, 1), below(pair.send, limit - 1, 2), at(pair.send, limit, 3),
        above(pair.send, limit + 1, 4);
    Proxy proxy;
    for (auto [message, tag] : {std::pair{&first, 3}, {&below, 4}, {&at, 3}}) {
      void* request = isend_once(pair.send, *message, tag);
      ASSERT_NE(request, nullptr) << "threshold " << threshold;
      proxy.add(request);
    }
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(isend_once(pair.send, above, 3), nullptr) << "threshold " << threshold;
    }
    size_t capacity = limit + 4099;
    Buffer in_a(pair.recv, capacity), in_b(pair.recv, capacity), in_c(pair.recv, capacity),
        in_d(pair.recv, capacity);
    size_t group = proxy.add(irecv(pair.recv, {&in_a, &in_b}, {4, 3}));
    size_t third = proxy.add(irecv(pair.recv, {&in_c}, {3}));
    size_t fourth = proxy.add(irecv(pair.recv, {&in_d}, {3}));
    proxy.isend_until_posted(pair.send, above, 3);
    ASSERT_TRUE(proxy.finish()) << "threshold " << threshold;
    EXPECT_EQ(proxy.sizes(group)[0], static_cast<int>(limit - 1));
    EXPECT_EQ(proxy.sizes(group)[1], 1);
    EXPECT_EQ(proxy.sizes(third)[0], static_cast<int>(limit));
    EXPECT_EQ(proxy.sizes(fourth)[0], static_cast<int>(limit + 1));
    EXPECT_TRUE(same_prefix(in_a, below));
    EXPECT_TRUE(same_prefix(in_b, first));
    EXPECT_TRUE(same_prefix(in_c, at));
    EXPECT_TRUE(same_prefix(in_d, above));
    EXPECT_EQ(close_pair(net(), &pair), "");
  }
}

// A large send waiting for its clear-to-send, overtaken by small ones of the same and of another
// tag: the receives are posted afterwards in the sends' order, and no small message may land in
// the large message's (larger) buffer, which is what matching by arrival would do.
TEST(NetPluginEager, EagerMessagesOvertakingARendezvousOneKeepPostingOrder) {
  EnvSetting eager("TERSE_NET_EAGER_BYTES", "1000");
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Buffer large(pair.send, 1 << 20, 10), small_other(pair.send, 999, 11),
      small_same(pair.send, 1000, 12);
  ASSERT_EQ(isend_once(pair.send, large, 1), nullptr);  // no receive yet
  Proxy proxy;
  void* other = isend_once(pair.send, small_other, 2);
  ASSERT_NE(other, nullptr);
  proxy.add(other);
  Buffer in_large(pair.recv, 2 << 20), in_other(pair.recv, 2 << 20), in_same(pair.recv, 2 << 20);
  size_t receive_large = proxy.add(irecv(pair.recv, {&in_large}, {1}));
  size_t receive_same = proxy.add(irecv(pair.recv, {&in_same}, {1}));
  size_t receive_other = proxy.add(irecv(pair.recv, {&in_other}, {2}));
  proxy.isend_until_posted(pair.send, large, 1);
  void* same = isend_once(pair.send, small_same, 1);  // right behind the large one
  ASSERT_NE(same, nullptr);
  proxy.add(same);
  ASSERT_TRUE(proxy.finish());
  EXPECT_EQ(proxy.sizes(receive_large)[0], 1 << 20);
  EXPECT_EQ(proxy.sizes(receive_same)[0], 1000);
  EXPECT_EQ(proxy.sizes(receive_other)[0], 999);
  EXPECT_TRUE(same_prefix(in_large, large));
  EXPECT_TRUE(same_prefix(in_same, small_same));
  EXPECT_TRUE(same_prefix(in_other, small_other));
  EXPECT_EQ(close_pair(net(), &pair), "");
}

// One grouped receive of four tags mixing sizes: two eager messages sent before it is posted,
// one at the threshold + 1 and one large sent after; each lands in its tag's buffer.
TEST(NetPluginEager, GroupedReceiveMixingEagerAndRendezvousSizes) {
  EnvSetting eager("TERSE_NET_EAGER_BYTES", "1000");
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  for (int round = 0; round < 3; ++round) {
    Buffer m10(pair.send, (1 << 20) + 3, 20 + round), m11(pair.send, 1000, 30 + round),
        m12(pair.send, 1001, 40 + round), m13(pair.send, 0, 50 + round);
    Buffer r10(pair.recv, 2 << 20), r11(pair.recv, 1000), r12(pair.recv, 1001), r13(pair.recv, 5);
    Proxy proxy;
    void* s11 = isend_once(pair.send, m11, 11);
    void* s13 = isend_once(pair.send, m13, 13);
    ASSERT_NE(s11, nullptr);
    ASSERT_NE(s13, nullptr);
    proxy.add(s11);
    proxy.add(s13);
    size_t receive = proxy.add(irecv(pair.recv, {&r10, &r11, &r12, &r13}, {10, 11, 12, 13}));
    proxy.isend_until_posted(pair.send, m12, 12);
    proxy.isend_until_posted(pair.send, m10, 10);
    ASSERT_TRUE(proxy.finish()) << "round " << round;
    EXPECT_EQ(proxy.sizes(receive)[0], (1 << 20) + 3);
    EXPECT_EQ(proxy.sizes(receive)[1], 1000);
    EXPECT_EQ(proxy.sizes(receive)[2], 1001);
    EXPECT_EQ(proxy.sizes(receive)[3], 0);
    EXPECT_TRUE(same_prefix(r10, m10));
    EXPECT_TRUE(same_prefix(r11, m11));
    EXPECT_TRUE(same_prefix(r12, m12));
  }
  EXPECT_EQ(close_pair(net(), &pair), "");
}

// The proxy-like driver over sizes that alternate around the threshold and far above it, many
// in flight, receive buffers larger than the messages (so every receive announces itself with a
// clear-to-send that an eager send has to discard).
TEST(NetPluginEager, InterleavedSmallAndLargeTraffic) {
  EnvSetting eager("TERSE_NET_EAGER_BYTES", "1000");
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Traffic traffic;
  std::vector<size_t> pattern = {1, 1 << 20, 999, 1000, 1001, 0, 70000, 3, 1000, 262147};
  for (int i = 0; i < 30; ++i) {
    for (size_t size : pattern) traffic.sizes.push_back(size);
  }
  traffic.in_flight = 32;
  traffic.receive_slack = 4099;
  EXPECT_EQ(drive(net(), pair.send, pair.recv, traffic), "");
  EXPECT_EQ(close_pair(net(), &pair), "");
}

// Lossless framing on eager messages: a compressible message that is encoded (on the coder
// pool), sent before its receive exists, arrives unexpected as header + encoding and decodes to
// the exact bytes; a raw one beside it too.
TEST(NetPluginEager, LosslessEagerMessagesBeforeTheirReceive) {
  EnvSetting compress("TERSE_NET_COMPRESS", "lossless");
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Buffer gradient(pair.send, 12288, 60, /*gradient=*/true), tiny(pair.send, 17, 61);
  void* sent_gradient = isend_once(pair.send, gradient, 1);
  void* sent_tiny = isend_once(pair.send, tiny, 1);
  ASSERT_NE(sent_gradient, nullptr);
  ASSERT_NE(sent_tiny, nullptr);
  // Let the encode finish and the messages go before any receive exists (testing the sends
  // posts an encoded one; they need not complete yet).
  int sent_done[2] = {};
  for (int i = 0; i < 200 && !(sent_done[0] && sent_done[1]); ++i) {
    if (!sent_done[0]) {
      ASSERT_EQ(net().test(sent_gradient, &sent_done[0], nullptr), ncclSuccess);
    }
    if (!sent_done[1]) {
      ASSERT_EQ(net().test(sent_tiny, &sent_done[1], nullptr), ncclSuccess);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Buffer in_gradient(pair.recv, 1 << 16), in_tiny(pair.recv, 1 << 16);
  void* receive = irecv(pair.recv, {&in_gradient}, {1});
  void* receive_tiny = irecv(pair.recv, {&in_tiny}, {1});
  std::vector<void*> requests = {receive, receive_tiny};
  if (!sent_done[0]) {
    requests.push_back(sent_gradient);
  }
  if (!sent_done[1]) {
    requests.push_back(sent_tiny);
  }
  std::vector<std::vector<int>> sizes = test_all(requests);
  ASSERT_FALSE(sizes.empty());
  EXPECT_EQ(sizes[0][0], 12288);
  EXPECT_EQ(sizes[1][0], 17);
  EXPECT_TRUE(same_prefix(in_gradient, gradient));
  EXPECT_TRUE(same_prefix(in_tiny, tiny));
  EXPECT_EQ(close_pair(net(), &pair), "");
  // The gradient message really went encoded: the receive comm's counters at close (logged at
  // INFO, which ctest sets) count it.
  const char* debug = getenv("TERSE_DEBUG");
  if (debug != nullptr && std::string(debug) == "INFO") {
    std::regex pattern("receive comm with peer .* closed: 2 messages, .* 1 encoded");
    bool encoded = false;
    for (const std::string& line : captured_lines()) {
      encoded = encoded || std::regex_search(line, pattern);
    }
    EXPECT_TRUE(encoded);
  }
}

// An eager send that goes before its receive is posted cannot know the receive's size: a send
// larger than the receive fails that receive with ncclInvalidUsage instead of writing past it.
// When the clear-to-send arrived first, isend itself refuses it; either way NCCL hears
// ncclInvalidUsage.
TEST(NetPluginEager, EagerSendLargerThanItsReceiveIsInvalidUsage) {
  // Tests the receive, and the send while it is unfinished (over TCP the send moves only in
  // its own comm's calls), until the receive ends; its result.
  auto receive_result = [](void* receive, void* send) {
    ncclResult_t result = ncclSuccess;
    int done = 0, sent = 0;
    auto start = std::chrono::steady_clock::now();
    while (result == ncclSuccess && !done && in_time(start)) {
      if (!sent) {
        EXPECT_EQ(net().test(send, &sent, nullptr), ncclSuccess);
      }
      result = net().test(receive, &done, nullptr);
    }
    return result;
  };
  {
    CommPair pair;
    ASSERT_EQ(open_pair(net(), &pair), "");
    Buffer message(pair.send, 200, 70);
    Buffer in(pair.recv, 100);
    void* send = isend_once(pair.send, message, 1);  // before the receive
    ASSERT_NE(send, nullptr);
    EXPECT_EQ(receive_result(irecv(pair.recv, {&in}, {1}), send), ncclInvalidUsage);
    EXPECT_EQ(close_pair(net(), &pair), "");
  }
  {
    CommPair pair;
    ASSERT_EQ(open_pair(net(), &pair), "");
    Buffer message(pair.send, 200, 71);
    Buffer in(pair.recv, 100);
    void* receive = irecv(pair.recv, {&in}, {1});
    // Testing the receive moves its comm's worker, so its clear-to-send can leave (over TCP it
    // does only then) and may reach the sender before the send.
    int done = 0;
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(net().test(receive, &done, nullptr), ncclSuccess);
    }
    void* request = nullptr;
    ncclResult_t sent = net().isend(pair.send, message.bytes.data(), message.bytes.size(), 1,
                                    message.handle, &request);
    if (sent == ncclSuccess) {
      ASSERT_NE(request, nullptr);  // eager: posted at once, or refused
      EXPECT_EQ(receive_result(receive, request), ncclInvalidUsage);
    } else {
      EXPECT_EQ(sent, ncclInvalidUsage);
    }
    EXPECT_EQ(close_pair(net(), &pair), "");
  }
}

// A receive no larger than the sender's eager bound announces nothing (any message for it goes
// eagerly), so a send above the bound waits for an announcement that never comes. Once a later
// receive of the same tag announced itself, the sender knows the earlier one was posted small
// and refuses the send instead of waiting for ever.
TEST(NetPluginEager, LargeSendForAnUnannouncedSmallReceiveIsInvalidUsage) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Buffer message(pair.send, 50000, 90);
  Buffer small(pair.recv, 100);
  Buffer large(pair.recv, 100000);
  void* first = irecv(pair.recv, {&small}, {1});
  void* second = irecv(pair.recv, {&large}, {1});
  ncclResult_t result = ncclSuccess;
  void* request = nullptr;
  auto start = std::chrono::steady_clock::now();
  while (result == ncclSuccess && request == nullptr &&
         std::chrono::steady_clock::now() < start + std::chrono::seconds(10)) {
    result = net().isend(pair.send, message.bytes.data(), message.bytes.size(), 1, message.handle,
                         &request);
    int done = 0;
    for (void* receive : {first, second}) {
      ASSERT_EQ(net().test(receive, &done, nullptr), ncclSuccess);
      EXPECT_EQ(done, 0);
    }
  }
  EXPECT_EQ(request, nullptr);
  EXPECT_EQ(result, ncclInvalidUsage);
  bool named = false;
  for (const std::string& line : captured_lines()) {
    named = named || line.find(
                         "isend of 50000 bytes with tag 1, but the receiver posted at most "
                         "16384 bytes for it (message 0 of that tag") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(close_pair(net(), &pair), "");
}

// Eager sends nobody received, some untested, then both comms closed: the closes return, and
// a fresh pair works afterwards.
TEST(NetPluginEager, CloseWithEagerSendsOutstanding) {
  CommPair pair;
  ASSERT_EQ(open_pair(net(), &pair), "");
  Buffer message(pair.send, 4096, 80);
  for (int i = 0; i < 24; ++i) ASSERT_NE(isend_once(pair.send, message, 9), nullptr);
  EXPECT_EQ(close_pair(net(), &pair), "");
  CommPair again;
  ASSERT_EQ(open_pair(net(), &again), "");
  Traffic traffic;
  traffic.sizes = {1, 4096, 16384, 16385, 1 << 20};
  EXPECT_EQ(drive(net(), again.send, again.recv, traffic), "");
  EXPECT_EQ(close_pair(net(), &again), "");
}

TEST(NetPluginEager, BadThresholdIsRefusedByName) {
  EnvSetting eager("TERSE_NET_EAGER_BYTES", "lots");
  unsigned char handle[netabi::kHandleMaxBytes] = {};
  void* listen = nullptr;
  ASSERT_EQ(net().listen(0, handle, &listen), ncclSuccess);
  void* send = nullptr;
  void* recv = nullptr;
  std::string error = connect_and_accept(net(), 0, handle, &send, listen, &recv, 10);
  EXPECT_NE(error, "");
  bool named = false;
  for (const std::string& line : captured_lines()) {
    named = named || line.find("TERSE_NET_EAGER_BYTES=lots") != std::string::npos;
  }
  EXPECT_TRUE(named);
  if (recv != nullptr) {
    EXPECT_EQ(net().close_recv(recv), ncclSuccess);
  }
  EXPECT_EQ(net().close_listen(listen), ncclSuccess);
}

}  // namespace
}  // namespace terse::test
