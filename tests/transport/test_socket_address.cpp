#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>

#include "common/result.h"
#include "transport/socket_address.h"

namespace terse {
namespace {

TEST(SocketAddress, ParsesIpv4AndBracketedIpv6) {
  SocketAddress address;
  ASSERT_EQ(SocketAddress::parse("127.0.0.1:29500", "TEST", &address), Result::kSuccess);
  EXPECT_EQ(address.family(), AF_INET);
  EXPECT_EQ(address.port(), 29500);
  EXPECT_EQ(address.to_string(), "127.0.0.1:29500");

  ASSERT_EQ(SocketAddress::parse("[::1]:1", "TEST", &address), Result::kSuccess);
  EXPECT_EQ(address.family(), AF_INET6);
  EXPECT_EQ(address.port(), 1);
  EXPECT_EQ(address.to_string(), "[::1]:1");
}

TEST(SocketAddress, ResolvesHostNames) {
  SocketAddress address;
  ASSERT_EQ(SocketAddress::parse("localhost:65535", "TEST", &address), Result::kSuccess);
  EXPECT_TRUE(address.family() == AF_INET || address.family() == AF_INET6);
  EXPECT_EQ(address.port(), 65535);
}

TEST(SocketAddress, RefusesMalformedTextNamingTheSource) {
  const char* bad[] = {"",           "127.0.0.1", "127.0.0.1:",   "127.0.0.1:0",
                       "host:65536", "host:12ab", "::1:5000",     "[::1]5000",
                       "[]:5000",    ":5000",     "127.0.0.1:-1", "[::1]:"};
  for (const char* text : bad) {
    SocketAddress address;
    EXPECT_EQ(SocketAddress::parse(text, "NCCL_COMM_ID", &address), Result::kInvalidArgument)
        << text;
    EXPECT_NE(std::string(last_error()).find("NCCL_COMM_ID="), std::string::npos) << text;
  }
}

TEST(SocketAddress, UnresolvableHostIsAnError) {
  SocketAddress address;
  EXPECT_EQ(SocketAddress::parse("no-such-host.invalid:5000", "TERSE_COMM_ID", &address),
            Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("no-such-host.invalid"), std::string::npos);
}

TEST(SocketAddress, PortCanBeChanged) {
  SocketAddress address;
  ASSERT_EQ(SocketAddress::parse("10.1.2.3:80", "TEST", &address), Result::kSuccess);
  address.set_port(8080);
  EXPECT_EQ(address.to_string(), "10.1.2.3:8080");
  EXPECT_EQ(SocketAddress().to_string(), "(unset)");
}

}  // namespace
}  // namespace terse
