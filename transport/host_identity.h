// A string that is equal for two ranks exactly when they run on the same host (operating system
// instance): the host name plus the kernel's boot id, so two containers or two machines that
// happen to share a host name are still told apart. TERSE_HOSTID overrides it, e.g. to make
// ranks on one machine behave as if they were on several in tests.
#pragma once

#include <string>

namespace terse {

std::string host_identity();

}  // namespace terse
