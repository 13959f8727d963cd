// TERSE_NET_COMPRESS through the loaded plugin: lossless mode round-trips every size exactly and
// encodes compressible data (the receive comm's byte counters, logged at close with
// TERSE_DEBUG=INFO, say so); off sends everything as it is; a bad value is refused by name.
#include <cstdlib>
#include <regex>

#include "net_test_support.h"

namespace terse::test {
namespace {

class CompressSetting {
 public:
  explicit CompressSetting(const char* value) { setenv("TERSE_NET_COMPRESS", value, 1); }
  ~CompressSetting() { unsetenv("TERSE_NET_COMPRESS"); }
};

struct ClosedCounters {
  unsigned long long messages = 0, raw = 0, wire = 0, encoded = 0;
};

// The counters of the last receive comm closed, from its INFO line.
ClosedCounters last_receive_counters() {
  std::regex pattern(
      "receive comm with peer .* closed: ([0-9]+) messages, ([0-9]+) bytes raw, ([0-9]+) bytes "
      "on the wire .* ([0-9]+) encoded");
  ClosedCounters counters;
  for (const std::string& line : captured_lines()) {
    std::smatch match;
    if (std::regex_search(line, match, pattern)) {
      counters = {std::stoull(match[1]), std::stoull(match[2]), std::stoull(match[3]),
                  std::stoull(match[4])};
    }
  }
  return counters;
}

std::string run(bool gradient, size_t largest) {
  LoadedNet& net = net_for_version(11);
  CommPair pair;
  std::string error = open_pair(net, &pair);
  if (!error.empty()) return error;
  Traffic traffic;
  traffic.sizes = sizes_up_to(largest);
  traffic.gradient = gradient;
  traffic.receive_slack = 3;
  error = drive(net, pair.send, pair.recv, traffic);
  std::string closed = close_pair(net, &pair);
  return error + closed;
}

TEST(NetPluginCompression, LosslessRoundTripsEverySizeAndEncodesGradients) {
  CompressSetting lossless("lossless");
  ASSERT_EQ(run(/*gradient=*/true, size_t{16} << 20), "");
  ClosedCounters gradients = last_receive_counters();
  EXPECT_GT(gradients.encoded, 0u);
  EXPECT_LT(gradients.wire, gradients.raw);  // bf16 gradients shrink
  ASSERT_EQ(run(/*gradient=*/false, size_t{4} << 20), "");
  ClosedCounters random = last_receive_counters();
  EXPECT_GT(random.messages, 0u);
  // Random bytes do not compress: sent as they are, a 16-byte header each.
  EXPECT_EQ(random.encoded, 0u);
  EXPECT_EQ(random.wire, random.raw + 16 * random.messages);
}

// Random bytes never shrink: after a few futile encodes the sender stops trying most messages.
TEST(NetPluginCompression, IncompressibleTrafficStopsBeingEncoded) {
  CompressSetting lossless("lossless");
  LoadedNet& net = net_for_version(11);
  CommPair pair;
  ASSERT_EQ(open_pair(net, &pair), "");
  Traffic traffic;
  traffic.sizes.assign(100, 65536);
  EXPECT_EQ(drive(net, pair.send, pair.recv, traffic), "");
  EXPECT_EQ(close_pair(net, &pair), "");
  std::regex pattern("send comm with peer .* ([0-9]+) encoded, ([0-9]+) sent without trying");
  unsigned long long untried = 0;
  for (const std::string& line : captured_lines()) {
    std::smatch match;
    if (std::regex_search(line, match, pattern)) untried = std::stoull(match[2]);
  }
  EXPECT_GT(untried, 50u);  // 100 messages: 8 futile tries, then 1 in 32
  EXPECT_EQ(last_receive_counters().encoded, 0u);
}

TEST(NetPluginCompression, OffSendsPlainMessages) {
  CompressSetting off("off");
  ASSERT_EQ(run(/*gradient=*/true, size_t{1} << 20), "");
  ClosedCounters counters = last_receive_counters();
  EXPECT_GT(counters.messages, 0u);
  EXPECT_EQ(counters.encoded, 0u);
  EXPECT_EQ(counters.wire, counters.raw);
}

TEST(NetPluginCompression, BadSettingIsRefusedByName) {
  LoadedNet& net = net_for_version(11);  // init reads the setting too: load before changing it
  CompressSetting bad("sometimes");
  unsigned char handle[netabi::kHandleMaxBytes];
  void* listen = nullptr;
  EXPECT_EQ(net.listen(0, handle, &listen), ncclInvalidArgument);
  bool named = false;
  for (const std::string& line : captured_lines()) {
    named = named || line.find("TERSE_NET_COMPRESS=sometimes") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace terse::test
