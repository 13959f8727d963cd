#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>

#include "common/result.h"
#include "transport/interface_address.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::ScopedEnv;

TEST(InterfaceNameMatches, FollowsNcclListRules) {
  EXPECT_TRUE(interface_name_matches("eth0", "eth"));
  EXPECT_TRUE(interface_name_matches("ib1", "eth,ib"));
  EXPECT_FALSE(interface_name_matches("lo", "eth,ib"));
  EXPECT_FALSE(interface_name_matches("docker0", "^docker,lo"));
  EXPECT_FALSE(interface_name_matches("lo", "^docker,lo"));
  EXPECT_TRUE(interface_name_matches("eth0", "^docker,lo"));
  EXPECT_TRUE(interface_name_matches("eth0", "=eth0,eth1"));
  EXPECT_FALSE(interface_name_matches("eth10", "=eth0,eth1"));
  EXPECT_TRUE(interface_name_matches("eth10", "^=eth0"));
  EXPECT_FALSE(interface_name_matches("eth0", "^=eth0"));
  EXPECT_FALSE(interface_name_matches("eth0", ""));
}

TEST(FindInterfaceAddress, LoopbackCanBeForced) {
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnv family("TERSE_SOCKET_FAMILY", "AF_INET");
  InterfaceAddress found;
  ASSERT_EQ(find_interface_address(&found), Result::kSuccess) << last_error();
  EXPECT_EQ(found.interface_name, "lo");
  EXPECT_EQ(found.address.to_string(), "127.0.0.1:0");
}

TEST(FindInterfaceAddress, Ipv6LoopbackWhenAsked) {
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "=lo");
  ScopedEnv family("TERSE_SOCKET_FAMILY", "AF_INET6");
  InterfaceAddress found;
  if (find_interface_address(&found) != Result::kSuccess) GTEST_SKIP() << "no IPv6 on lo here";
  EXPECT_EQ(found.address.family(), AF_INET6);
  EXPECT_EQ(found.address.to_string(), "[::1]:0");
}

TEST(FindInterfaceAddress, NcclVariableIsHonouredWhenTerseOneIsUnset) {
  ScopedEnv terse("TERSE_SOCKET_IFNAME", nullptr);
  ScopedEnv nccl("NCCL_SOCKET_IFNAME", "=lo");
  InterfaceAddress found;
  ASSERT_EQ(find_interface_address(&found), Result::kSuccess) << last_error();
  EXPECT_EQ(found.interface_name, "lo");
}

TEST(FindInterfaceAddress, DefaultIsAnUpInterface) {
  ScopedEnv terse("TERSE_SOCKET_IFNAME", nullptr);
  ScopedEnv nccl("NCCL_SOCKET_IFNAME", nullptr);
  InterfaceAddress found;
  ASSERT_EQ(find_interface_address(&found), Result::kSuccess) << last_error();
  EXPECT_FALSE(found.interface_name.empty());
  EXPECT_TRUE(found.address.is_set());
}

TEST(FindInterfaceAddress, UnmatchedListNamesTheVariable) {
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "=no-such-interface");
  InterfaceAddress found;
  EXPECT_EQ(find_interface_address(&found), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_SOCKET_IFNAME==no-such-interface"),
            std::string::npos)
      << last_error();
}

TEST(FindInterfaceAddress, BadFamilyIsRefused) {
  ScopedEnv family("TERSE_SOCKET_FAMILY", "AF_UNIX");
  InterfaceAddress found;
  EXPECT_EQ(find_interface_address(&found), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("AF_UNIX"), std::string::npos);
}

}  // namespace
}  // namespace terse
