#include "plugin/net/eager_setting.h"

#include <cstdint>

#include "common/env.h"
#include "plugin/net/net_log.h"

namespace terse::net {

ncclResult_t eager_bytes(size_t* out) {
  int64_t value = static_cast<int64_t>(kDefaultEagerBytes);
  if (env_int("TERSE_NET_EAGER_BYTES", value, &value) != ncclSuccess || value < 0 ||
      static_cast<uint64_t>(value) > kMaxEagerBytes) {
    return NET_FAIL(ncclInvalidArgument, "TERSE_NET_EAGER_BYTES=%s is not a size from 0 to %zu",
                    env_string("TERSE_NET_EAGER_BYTES", "").c_str(), kMaxEagerBytes);
  }
  *out = static_cast<size_t>(value);
  return ncclSuccess;
}

}  // namespace terse::net
