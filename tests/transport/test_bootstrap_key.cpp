// The bootstrap key and its codes: HMAC-SHA256 checked against RFC 4231's published vectors,
// TERSE_COMM_SECRET as a value or a file, and codes that change with everything they cover.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/bootstrap_key.h"
#include "transport/bootstrap_messages.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::ScopedEnv;

std::string hex(const uint8_t* bytes, size_t size) {
  std::string text;
  char digits[3];
  for (size_t i = 0; i < size; ++i) {
    snprintf(digits, sizeof(digits), "%02x", bytes[i]);
    text += digits;
  }
  return text;
}

BootstrapKey key_from_env(uint64_t id_secret) {
  BootstrapKey key;
  EXPECT_EQ(derive_bootstrap_key(id_secret, &key), Result::kSuccess) << last_error();
  return key;
}

bool same(const BootstrapKey& a, const BootstrapKey& b) {
  return memcmp(a.bytes, b.bytes, sizeof(a.bytes)) == 0;
}

std::string write_file(const std::string& text) {
  char path[] = "/tmp/terse_secret_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(BootstrapKey, MacIsHmacSha256) {
  // RFC 4231 test case 1: a 20-byte key of 0x0b; HMAC pads a short key with zeros, so the same
  // 20 bytes followed by 12 zeros in a 32-byte key give the published code.
  BootstrapKey key;
  memset(key.bytes, 0x0b, 20);
  const char data[] = "Hi There";
  const MacPiece split[] = {{data, 3}, {data + 3, 5}};  // pieces are concatenated
  uint8_t mac[kBootstrapMacBytes];
  bootstrap_mac(key, split, 2, mac);
  EXPECT_EQ(hex(mac, sizeof(mac)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // FIPS 180-2's "abc".
  uint8_t digest[kBootstrapDigestBytes];
  bootstrap_digest("abc", 3, digest);
  EXPECT_EQ(hex(digest, sizeof(digest)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BootstrapKey, CommSecretValueAndFileGiveTheSameKey) {
  BootstrapKey plain, from_value, from_file, other_id;
  {
    ScopedEnv unset("TERSE_COMM_SECRET", nullptr);
    plain = key_from_env(42);
  }
  {
    ScopedEnv value("TERSE_COMM_SECRET", "correct horse battery staple");
    from_value = key_from_env(42);
    other_id = key_from_env(43);
  }
  std::string path = write_file("correct horse battery staple\n");  // the newline is dropped
  {
    ScopedEnv file("TERSE_COMM_SECRET", ("@" + path).c_str());
    from_file = key_from_env(42);
  }
  unlink(path.c_str());
  EXPECT_TRUE(same(from_value, from_file));
  EXPECT_FALSE(same(plain, from_value));     // the secret changes the key
  EXPECT_FALSE(same(from_value, other_id));  // and so does the id
  BootstrapKey expected;
  const char secret[] = "correct horse battery staple";
  derive_bootstrap_key_from(42, reinterpret_cast<const uint8_t*>(secret), strlen(secret),
                            &expected);
  EXPECT_TRUE(same(expected, from_value));
}

TEST(BootstrapKey, UnreadableOrEmptyOrHugeSecretsAreRefusedByName) {
  BootstrapKey key;
  {
    ScopedEnv missing("TERSE_COMM_SECRET", "@/nonexistent/terse/secret");
    EXPECT_EQ(derive_bootstrap_key(1, &key), Result::kInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("TERSE_COMM_SECRET=@/nonexistent/terse/secret"),
              std::string::npos)
        << last_error();
  }
  std::string empty = write_file("\n");
  {
    ScopedEnv file("TERSE_COMM_SECRET", ("@" + empty).c_str());
    EXPECT_EQ(derive_bootstrap_key(1, &key), Result::kInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("empty"), std::string::npos) << last_error();
  }
  unlink(empty.c_str());
  std::string huge_text(kMaxCommSecretBytes + 1, 's');
  std::string huge = write_file(huge_text);
  {
    ScopedEnv file("TERSE_COMM_SECRET", ("@" + huge).c_str());
    EXPECT_EQ(derive_bootstrap_key(1, &key), Result::kInvalidArgument);
  }
  unlink(huge.c_str());
  {
    ScopedEnv value("TERSE_COMM_SECRET", huge_text.c_str());
    EXPECT_EQ(derive_bootstrap_key(1, &key), Result::kInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("TERSE_COMM_SECRET"), std::string::npos);
  }
}

TEST(BootstrapKey, HelloCodeCoversNonceKeyHeaderAndPayload) {
  BootstrapKey key;
  derive_bootstrap_key_from(7, nullptr, 0, &key);
  uint8_t nonce[kBootstrapNonceBytes] = {1, 2, 3};
  std::vector<uint8_t> payload = {9, 8, 7, 6};
  BootstrapHello hello;
  hello.rank = 1;
  hello.nranks = 4;
  hello.payload_bytes = static_cast<uint32_t>(payload.size());
  uint8_t base[kBootstrapMacBytes];
  hello_mac(key, nonce, hello, payload.data(), base);

  // The mac field itself is not covered: filling it in does not change the code.
  BootstrapHello with_mac = hello;
  memcpy(with_mac.mac, base, sizeof(base));
  uint8_t again[kBootstrapMacBytes];
  hello_mac(key, nonce, with_mac, payload.data(), again);
  EXPECT_TRUE(bootstrap_mac_equal(base, again));

  auto differs = [&](const BootstrapKey& k, const uint8_t* n, const BootstrapHello& h,
                     const std::vector<uint8_t>& p) {
    uint8_t code[kBootstrapMacBytes];
    hello_mac(k, n, h, p.data(), code);
    return !bootstrap_mac_equal(base, code);
  };
  BootstrapKey other_key;
  derive_bootstrap_key_from(8, nullptr, 0, &other_key);
  uint8_t other_nonce[kBootstrapNonceBytes] = {1, 2, 4};
  BootstrapHello other_rank = hello;
  other_rank.rank = 2;
  std::vector<uint8_t> other_payload = {9, 8, 7, 5};
  EXPECT_TRUE(differs(other_key, nonce, hello, payload));
  EXPECT_TRUE(differs(key, other_nonce, hello, payload));
  EXPECT_TRUE(differs(key, nonce, other_rank, payload));
  EXPECT_TRUE(differs(key, nonce, hello, other_payload));
}

}  // namespace
}  // namespace terse
