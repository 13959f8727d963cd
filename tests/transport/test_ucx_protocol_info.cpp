// The rendezvous size UCX chose for an endpoint (transport/ucx_protocol_info.h): read from the
// text ucp_ep_print_info writes, in the form UCX 1.13 prints it, and from live TCP endpoints whose
// threshold this test sets through UCX_RNDV_THRESH (UCX's own setting, so the expected value does
// not come from the code under test).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/link.h"
#include "transport/ucx_context.h"
#include "transport/ucx_protocol_info.h"
#include "transport/ucx_worker.h"
#include "transport_test_support.h"

namespace terse {
namespace {

// An endpoint's protocol lines as UCX 1.13 prints them, with `tag_send`'s ranges given.
std::string endpoint_info(const std::string& tag_send_ranges) {
  return "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
         "#                 lane[0]:  0:tcp/lo.0 md[0]   -> md[0]/tcp/sysdev[255] am am_bw#0\n#\n"
         "#            tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..262144..<rndv>..(inf)\n"
         "#                tag_send: " +
         tag_send_ranges +
         "\n"
         "#           tag_send_sync: 0..<egr/short>..8185..<egr/zcopy>..4096..<rndv>..(inf)\n#\n";
}

TEST(UcxProtocolInfo, ReadsTheSizeWhereTagSendTurnsRendezvous) {
  // tag_send's own line, not tag_send_nbr's (262144) or tag_send_sync's (4096) around it.
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(
                endpoint_info("0..<egr/short>..8185..<egr/zcopy>..19522..<rndv>..(inf)")),
            std::optional<size_t>(19522));
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(endpoint_info("0..<rndv>..(inf)")),
            std::optional<size_t>(0));
}

TEST(UcxProtocolInfo, NoRendezvousRangeMeansNeverAndUnknownTextMeansUnknown) {
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(
                endpoint_info("0..<egr/short>..8185..<egr/zcopy>..(inf)")),
            std::optional<size_t>(SIZE_MAX));
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(""), std::nullopt);
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(endpoint_info("garbled")), std::nullopt);
  EXPECT_EQ(parse_tag_send_rendezvous_threshold(endpoint_info("..<rndv>..(inf)")), std::nullopt);
  // A later UCX's protocol table has no such line.
  EXPECT_EQ(parse_tag_send_rendezvous_threshold("# tag_send_nbr: 0..<egr/short>..(inf)\n"),
            std::nullopt);
}

TEST(UcxProtocolInfo, ReadsSizesAsUcxRndvThreshGivesThem) {
  EXPECT_EQ(parse_ucx_size("262145"), std::optional<size_t>(262145));
  EXPECT_EQ(parse_ucx_size("8K"), std::optional<size_t>(8192));
  EXPECT_EQ(parse_ucx_size("8kb"), std::optional<size_t>(8192));
  EXPECT_EQ(parse_ucx_size("2M"), std::optional<size_t>(size_t{2} << 20));
  EXPECT_EQ(parse_ucx_size("1g"), std::optional<size_t>(size_t{1} << 30));
  EXPECT_EQ(parse_ucx_size("inf"), std::optional<size_t>(SIZE_MAX));
  EXPECT_EQ(parse_ucx_size("auto"), std::nullopt);
  EXPECT_EQ(parse_ucx_size(""), std::nullopt);
  EXPECT_EQ(parse_ucx_size("-5"), std::nullopt);
  EXPECT_EQ(parse_ucx_size("12 kilo"), std::nullopt);
  EXPECT_EQ(parse_ucx_size("99999999999999999999G"), std::nullopt);
}

// Two links over UCX's TCP transport in this process, with UCX_RNDV_THRESH set to `threshold`.
std::optional<size_t> live_threshold(const char* threshold) {
  test::ScopedEnv setting("UCX_RNDV_THRESH", threshold);
  std::shared_ptr<UcxContext> context;
  EXPECT_EQ(UcxContext::create(2, "tcp", &context), Result::kSuccess) << last_error();
  if (context == nullptr) return std::nullopt;
  std::unique_ptr<Link> near, far;
  EXPECT_EQ(Link::create(context, &near), Result::kSuccess) << last_error();
  EXPECT_EQ(Link::create(context, &far), Result::kSuccess) << last_error();
  if (near == nullptr || far == nullptr) return std::nullopt;
  EXPECT_EQ(near->rendezvous_threshold(), std::nullopt);  // not connected yet
  std::vector<uint8_t> far_address;
  EXPECT_EQ(far->address(&far_address), Result::kSuccess);
  EXPECT_EQ(near->connect(far_address, UcxErrorMode::kNone, 1), UCS_OK);
  return near->rendezvous_threshold();
}

TEST(UcxProtocolInfo, ALiveTcpLinkReportsTheThresholdUcxWasGiven) {
  EXPECT_EQ(live_threshold("12345"), std::optional<size_t>(12345));
  EXPECT_EQ(live_threshold("70000"), std::optional<size_t>(70000));
  EXPECT_EQ(live_threshold("inf"), std::optional<size_t>(SIZE_MAX));
}

}  // namespace
}  // namespace terse
