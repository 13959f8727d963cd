#include "transport/process_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace terse {
namespace {

struct ProcessStat {
  char state = '?';
  uint64_t start_time = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid ... starttime ...". comm may hold spaces and
// parentheses, so fields are counted from the last ')'. Read with plain system calls into a
// buffer on the stack: a transfer wait asks this of its peers (is_gone) every
// kLivenessCheckInterval, and a warm call must not allocate however long it waits.
bool read_stat(int32_t pid, ProcessStat* stat) {
  char path[32];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // The line is far shorter (52 numbers and a comm of at most 64 bytes); starttime, the 22nd
  // field, comes within its first few hundred bytes.
  char line[4096];
  size_t length = 0;
  while (length < sizeof(line) - 1) {
    const ssize_t got = read(fd, line + length, sizeof(line) - 1 - length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    length += static_cast<size_t>(got);
  }
  close(fd);
  line[length] = '\0';
  char* newline = strchr(line, '\n');
  if (newline != nullptr) *newline = '\0';
  const char* field = strrchr(line, ')');
  if (field == nullptr) return false;
  ++field;
  auto skip_spaces = [&] {
    while (*field != '\0' && isspace(static_cast<unsigned char>(*field))) ++field;
    return *field != '\0';
  };
  if (!skip_spaces()) return false;
  const char state = *field++;
  // Fields 4..21 come between the state (field 3) and starttime (field 22).
  for (int skipped = 4; skipped <= 21; ++skipped) {
    if (!skip_spaces()) return false;
    while (*field != '\0' && !isspace(static_cast<unsigned char>(*field))) ++field;
  }
  if (!skip_spaces()) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long start_time = strtoull(field, &end, 10);
  if (end == field || errno == ERANGE) return false;
  stat->state = state;
  stat->start_time = start_time;
  return true;
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
