#include "transport/transport_settings.h"

#include <cstdint>
#include <string>

#include "common/env.h"
#include "common/result.h"

namespace terse {

Result transport_timeout_seconds(double* seconds) {
  int64_t value = 0;
  TERSE_CHECK(env_int("TERSE_TIMEOUT_S", kDefaultTransportTimeoutSeconds, &value));
  // A week is far beyond any real wait; the bound keeps deadline arithmetic from overflowing.
  if (value <= 0 || value > 7 * 24 * 3600) {
    return fail(Result::kInvalidArgument,
                "TERSE_TIMEOUT_S=%lld is out of range (expected 1 to 604800 seconds)",
                static_cast<long long>(value));
  }
  *seconds = static_cast<double>(value);
  return Result::kSuccess;
}

Result ucx_error_mode(UcxErrorModeSetting* setting) {
  std::string text = env_string("TERSE_UCX_ERROR_MODE", "auto");
  if (text == "auto") {
    *setting = UcxErrorModeSetting::kAuto;
  } else if (text == "peer") {
    *setting = UcxErrorModeSetting::kPeer;
  } else if (text == "none") {
    *setting = UcxErrorModeSetting::kNone;
  } else {
    return fail(Result::kInvalidArgument, "TERSE_UCX_ERROR_MODE=%s is not 'auto', 'peer' or 'none'",
                text.c_str());
  }
  return Result::kSuccess;
}

}  // namespace terse
