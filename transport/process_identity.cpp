#include "transport/process_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace terse {
namespace {

struct ProcessStat {
  char state = '?';
  uint64_t start_time = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid ... starttime ...". comm may hold spaces and
// parentheses, so fields are counted from the last ')'.
bool read_stat(int32_t pid, ProcessStat* stat) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(file, line)) return false;
  size_t comm_end = line.rfind(')');
  if (comm_end == std::string::npos) return false;
  std::istringstream fields(line.substr(comm_end + 1));
  fields >> stat->state;
  // Fields 4..21 come between the state (field 3) and starttime (field 22).
  std::string skipped;
  for (int field = 4; field <= 21; ++field) fields >> skipped;
  fields >> stat->start_time;
  return !fields.fail();
}

std::string process_space_of_this_process() {
  std::string boot_id;
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  if (!std::getline(file, boot_id) || boot_id.empty()) return "";
  struct stat namespace_stat {};
  if (::stat("/proc/self/ns/pid", &namespace_stat) != 0) return "";
  return boot_id +
         ":pidns=" + std::to_string(static_cast<unsigned long long>(namespace_stat.st_dev)) + "/" +
         std::to_string(static_cast<unsigned long long>(namespace_stat.st_ino));
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity identity;
  identity.pid = static_cast<int32_t>(getpid());
  ProcessStat stat;
  if (read_stat(identity.pid, &stat)) {
    identity.start_time = stat.start_time;
    identity.process_space = process_space_of_this_process();
  }
  return identity;
}

bool shares_process_space(const ProcessIdentity& mine, const ProcessIdentity& other) {
  return !mine.process_space.empty() && mine.process_space == other.process_space;
}

bool same_process(const ProcessIdentity& a, const ProcessIdentity& b) {
  return shares_process_space(a, b) && a.pid == b.pid && a.start_time == b.start_time;
}

bool is_gone(const ProcessIdentity& process) {
  ProcessStat stat;
  if (!read_stat(process.pid, &stat)) return true;
  return stat.state == 'Z' || stat.state == 'X' || stat.start_time != process.start_time;
}

}  // namespace terse
