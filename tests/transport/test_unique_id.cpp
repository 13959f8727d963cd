#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

#include "common/result.h"
#include "transport/transport_settings.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::ScopedEnv;

UniqueIdFields fields_for(const char* host_port, uint64_t secret, bool rank_zero) {
  UniqueIdFields fields;
  EXPECT_EQ(SocketAddress::parse(host_port, "TEST", &fields.root), Result::kSuccess);
  fields.secret = secret;
  fields.root_started_by_rank_zero = rank_zero;
  return fields;
}

TEST(UniqueId, RoundTripsIpv4AndIpv6) {
  for (const char* host_port : {"192.0.2.17:29500", "[fd00::2]:1", "[::1]:65535"}) {
    for (bool rank_zero : {false, true}) {
      UniqueIdFields in = fields_for(host_port, 0x0123456789abcdefull, rank_zero);
      UniqueId id;
      memset(&id, 0x5a, sizeof(id));
      encode_unique_id(in, &id);
      UniqueIdFields out;
      ASSERT_EQ(decode_unique_id(id, &out), Result::kSuccess) << last_error();
      EXPECT_EQ(out.root.to_string(), in.root.to_string());
      EXPECT_EQ(out.secret, in.secret);
      EXPECT_EQ(out.root_started_by_rank_zero, rank_zero);
      // Unused bytes are zero, so ids compare equal bytewise when their fields do.
      for (size_t i = 40; i < kUniqueIdBytes; ++i) EXPECT_EQ(id.internal[i], 0) << i;
    }
  }
}

TEST(UniqueId, StartsWithReadableMagic) {
  UniqueId id;
  encode_unique_id(fields_for("127.0.0.1:5", 1, false), &id);
  EXPECT_EQ(std::string(id.internal, 4), "trse");
}

TEST(UniqueId, RefusesIdsThatAreNotTerses) {
  UniqueId id;
  memset(&id, 0, sizeof(id));
  UniqueIdFields fields;
  EXPECT_EQ(decode_unique_id(id, &fields), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("magic"), std::string::npos);

  encode_unique_id(fields_for("127.0.0.1:5", 1, false), &id);
  id.internal[4] = 9;  // version
  EXPECT_EQ(decode_unique_id(id, &fields), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("version 9"), std::string::npos);

  encode_unique_id(fields_for("127.0.0.1:5", 1, false), &id);
  id.internal[7] = 5;  // family
  EXPECT_EQ(decode_unique_id(id, &fields), Result::kInvalidArgument);

  encode_unique_id(fields_for("127.0.0.1:5", 1, false), &id);
  id.internal[8] = id.internal[9] = 0;  // port
  EXPECT_EQ(decode_unique_id(id, &fields), Result::kInvalidArgument);
}

TEST(UniqueIdFromEnvironment, TerseVariableWinsAndEveryRankDerivesTheSameId) {
  ScopedEnv terse("TERSE_COMM_ID", "127.0.0.1:29511");
  ScopedEnv nccl("NCCL_COMM_ID", "127.0.0.1:29999");
  UniqueIdFields first, second;
  bool present = false;
  ASSERT_EQ(unique_id_from_environment(&first, &present), Result::kSuccess);
  ASSERT_TRUE(present);
  ASSERT_EQ(unique_id_from_environment(&second, &present), Result::kSuccess);
  EXPECT_EQ(first.root.to_string(), "127.0.0.1:29511");
  EXPECT_TRUE(first.root_started_by_rank_zero);
  EXPECT_EQ(first.secret, second.secret);

  UniqueId a, b;
  ASSERT_EQ(create_unique_id(&a), Result::kSuccess);
  ASSERT_EQ(create_unique_id(&b), Result::kSuccess);
  EXPECT_EQ(memcmp(&a, &b, sizeof(a)), 0);
}

TEST(UniqueIdFromEnvironment, NcclVariableAndAbsence) {
  ScopedEnv terse("TERSE_COMM_ID", nullptr);
  UniqueIdFields fields;
  bool present = true;
  {
    ScopedEnv nccl("NCCL_COMM_ID", nullptr);
    ASSERT_EQ(unique_id_from_environment(&fields, &present), Result::kSuccess);
    EXPECT_FALSE(present);
  }
  ScopedEnv nccl("NCCL_COMM_ID", "[::1]:29512");
  ASSERT_EQ(unique_id_from_environment(&fields, &present), Result::kSuccess);
  EXPECT_TRUE(present);
  EXPECT_EQ(fields.root.to_string(), "[::1]:29512");
}

TEST(UniqueIdFromEnvironment, MalformedValueNamesTheVariable) {
  ScopedEnv terse("TERSE_COMM_ID", "just-a-host");
  UniqueId id;
  EXPECT_EQ(create_unique_id(&id), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_COMM_ID=just-a-host"), std::string::npos);
}

TEST(CreateUniqueId, FreshSecretsAndAPortEachTime) {
  ScopedEnv terse("TERSE_COMM_ID", nullptr);
  ScopedEnv nccl("NCCL_COMM_ID", nullptr);
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnv timeout("TERSE_TIMEOUT_S", "2");  // the unused roots give up quickly
  UniqueId a, b;
  ASSERT_EQ(create_unique_id(&a), Result::kSuccess) << last_error();
  ASSERT_EQ(create_unique_id(&b), Result::kSuccess) << last_error();
  UniqueIdFields fa, fb;
  ASSERT_EQ(decode_unique_id(a, &fa), Result::kSuccess);
  ASSERT_EQ(decode_unique_id(b, &fb), Result::kSuccess);
  EXPECT_NE(fa.secret, fb.secret);
  EXPECT_NE(fa.root.port(), 0);
  EXPECT_NE(fa.root.port(), fb.root.port());
  EXPECT_FALSE(fa.root_started_by_rank_zero);
}

TEST(TransportTimeout, DefaultAndRefusals) {
  double seconds = 0;
  {
    ScopedEnv unset("TERSE_TIMEOUT_S", nullptr);
    ASSERT_EQ(transport_timeout_seconds(&seconds), Result::kSuccess);
    EXPECT_EQ(seconds, kDefaultTransportTimeoutSeconds);
  }
  for (const char* bad : {"0", "-3", "ten", "999999999"}) {
    ScopedEnv value("TERSE_TIMEOUT_S", bad);
    EXPECT_EQ(transport_timeout_seconds(&seconds), Result::kInvalidArgument) << bad;
    EXPECT_NE(std::string(last_error()).find("TERSE_TIMEOUT_S"), std::string::npos);
  }
}

TEST(UcxErrorModeSetting, AutoByDefaultPeerOrNoneOnRequestElseRefused) {
  UcxErrorModeSetting setting = UcxErrorModeSetting::kNone;
  {
    ScopedEnv unset("TERSE_UCX_ERROR_MODE", nullptr);
    ASSERT_EQ(ucx_error_mode(&setting), Result::kSuccess);
    EXPECT_EQ(setting, UcxErrorModeSetting::kAuto);
  }
  {
    ScopedEnv peer("TERSE_UCX_ERROR_MODE", "peer");
    ASSERT_EQ(ucx_error_mode(&setting), Result::kSuccess);
    EXPECT_EQ(setting, UcxErrorModeSetting::kPeer);
  }
  {
    ScopedEnv none("TERSE_UCX_ERROR_MODE", "none");
    ASSERT_EQ(ucx_error_mode(&setting), Result::kSuccess);
    EXPECT_EQ(setting, UcxErrorModeSetting::kNone);
  }
  ScopedEnv bad("TERSE_UCX_ERROR_MODE", "sometimes");
  EXPECT_EQ(ucx_error_mode(&setting), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_UCX_ERROR_MODE=sometimes"), std::string::npos);
}

}  // namespace
}  // namespace terse
