#include "transport/bootstrap_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/wire_bytes.h"

namespace terse {
namespace {

constexpr const char* kVariable = "TERSE_COMM_SECRET";

Result read_secret_file(const std::string& path, std::string* secret) {
  FILE* file = fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return fail(Result::kInvalidArgument, "%s=@%s: cannot open the file: %s", kVariable,
                path.c_str(), strerror(errno));
  }
  struct stat status {};
  if (fstat(fileno(file), &status) == 0 && (status.st_mode & 077) != 0) {
    TERSE_WARN(
        "%s=@%s: the file can be read by other users (mode %03o); chmod 600 keeps the "
        "bootstrap secret yours",
        kVariable, path.c_str(), static_cast<unsigned>(status.st_mode & 0777));
  }
  char buffer[kMaxCommSecretBytes + 2];
  size_t got = fread(buffer, 1, sizeof(buffer), file);
  const bool read_error = ferror(file) != 0;
  fclose(file);
  if (read_error) {
    return fail(Result::kInvalidArgument, "%s=@%s: cannot read the file", kVariable, path.c_str());
  }
  // One trailing newline is how editors and `echo` end a file, not part of the secret.
  if (got > 0 && buffer[got - 1] == '\n') --got;
  if (got > kMaxCommSecretBytes) {
    return fail(Result::kInvalidArgument, "%s=@%s: the secret is longer than %zu bytes", kVariable,
                path.c_str(), kMaxCommSecretBytes);
  }
  secret->assign(buffer, got);
  return Result::kSuccess;
}

}  // namespace

Result random_bytes(void* out, size_t size) {
  uint8_t* bytes = static_cast<uint8_t*>(out);
  size_t filled = 0;
  while (filled < size) {
    ssize_t got = getrandom(bytes + filled, size - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return fail(Result::kSystemError, "getrandom failed: %s", strerror(errno));
    filled += static_cast<size_t>(got);
  }
  return Result::kSuccess;
}

Result derive_bootstrap_key(uint64_t id_secret, BootstrapKey* key) {
  std::string text = env_string(kVariable, "");
  std::string secret;
  if (!text.empty() && text[0] == '@') {
    TERSE_CHECK(read_secret_file(text.substr(1), &secret));
    if (secret.empty()) {
      return fail(Result::kInvalidArgument, "%s=%s: the file is empty; a secret needs a byte",
                  kVariable, text.c_str());
    }
  } else {
    if (text.size() > kMaxCommSecretBytes) {
      return fail(Result::kInvalidArgument, "%s is longer than %zu bytes", kVariable,
                  kMaxCommSecretBytes);
    }
    secret = text;
  }
  derive_bootstrap_key_from(id_secret, reinterpret_cast<const uint8_t*>(secret.data()),
                            secret.size(), key);
  OPENSSL_cleanse(secret.data(), secret.size());
  return Result::kSuccess;
}

void derive_bootstrap_key_from(uint64_t id_secret, const uint8_t* secret, size_t secret_bytes,
                               BootstrapKey* key) {
  std::vector<uint8_t> message;
  ByteWriter writer(&message);
  static const char kLabel[] = "terse bootstrap key v2";
  writer.bytes(kLabel, sizeof(kLabel) - 1);
  writer.u64(id_secret);
  // HMAC accepts an empty key: without TERSE_COMM_SECRET the key depends on the id alone.
  static const uint8_t kNoSecret = 0;
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret_bytes > 0 ? secret : &kNoSecret, static_cast<int>(secret_bytes),
       message.data(), message.size(), key->bytes, &length);
}

void bootstrap_mac(const BootstrapKey& key, const MacPiece* pieces, size_t count,
                   uint8_t mac[kBootstrapMacBytes]) {
  // OpenSSL 3's EVP_MAC streams the pieces (a rank table can be megabytes) without a copy.
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* context = hmac != nullptr ? EVP_MAC_CTX_new(hmac) : nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                         OSSL_PARAM_construct_end()};
  size_t length = 0;
  bool ok = context != nullptr && EVP_MAC_init(context, key.bytes, sizeof(key.bytes), params) == 1;
  for (size_t i = 0; ok && i < count; ++i) {
    ok = EVP_MAC_update(context, static_cast<const unsigned char*>(pieces[i].data),
                        pieces[i].size) == 1;
  }
  ok = ok && EVP_MAC_final(context, mac, &length, kBootstrapMacBytes) == 1;
  EVP_MAC_CTX_free(context);
  EVP_MAC_free(hmac);
  // A code that cannot be computed must never match: fill it from the random source instead.
  if (!ok || length != kBootstrapMacBytes) (void)random_bytes(mac, kBootstrapMacBytes);
}

void bootstrap_digest(const void* data, size_t size, uint8_t digest[kBootstrapDigestBytes]) {
  unsigned int length = 0;
  if (EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) != 1 ||
      length != kBootstrapDigestBytes) {
    (void)random_bytes(digest, kBootstrapDigestBytes);  // never matches a real digest
  }
}

bool bootstrap_mac_equal(const uint8_t* a, const uint8_t* b) {
  return CRYPTO_memcmp(a, b, kBootstrapMacBytes) == 0;
}

}  // namespace terse
