#include "transport/host_identity.h"

#include <unistd.h>

#include <fstream>

#include "common/env.h"

namespace terse {

std::string host_identity() {
  std::string forced = env_string("TERSE_HOSTID", "");
  if (!forced.empty()) return forced;
  char name[256] = "unknown-host";
  gethostname(name, sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  std::string identity = name;
  std::string boot_id;
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  if (std::getline(file, boot_id) && !boot_id.empty()) identity += ":" + boot_id;
  return identity;
}

}  // namespace terse
