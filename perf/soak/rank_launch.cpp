#include "perf/soak/rank_launch.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace terse {
namespace soak {

int run_ranks(const std::vector<std::vector<std::string>>& arguments, int agreed_code) {
  char self[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) {
    std::fprintf(stderr, "soak: cannot read /proc/self/exe: %s\n", std::strerror(errno));
    return 2;
  }
  std::vector<pid_t> pids;
  int status = 0;
  for (const std::vector<std::string>& rank_arguments : arguments) {
    std::vector<char*> argv = {self};
    for (const std::string& argument : rank_arguments) {
      argv.push_back(const_cast<char*>(argument.c_str()));
    }
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, self, nullptr, nullptr, argv.data(), environ);
    if (error != 0) {
      std::fprintf(stderr, "soak: cannot start rank %zu: %s\n", pids.size(), std::strerror(error));
      status = 2;
      break;
    }
    pids.push_back(pid);
  }
  if (status != 0) {
    for (pid_t pid : pids) kill(pid, SIGTERM);
  }
  bool stopping = status != 0;
  size_t remaining = pids.size();
  while (remaining > 0) {
    int wait_status = 0;
    const pid_t finished = waitpid(-1, &wait_status, 0);
    if (finished < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool ours = false;
    for (pid_t& pid : pids) {
      if (pid == finished) {
        pid = 0;  // not signalled again
        ours = true;
      }
    }
    if (!ours) continue;
    --remaining;
    const int code =
        WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    if (code != 0 && status == 0) status = code;
    if (code != 0 && code != agreed_code && !stopping) {
      stopping = true;
      std::fprintf(stderr, "soak: a rank (pid %d) exited with %d; stopping the others\n",
                   static_cast<int>(finished), code);
      for (pid_t pid : pids) {
        if (pid != 0) kill(pid, SIGTERM);
      }
    }
  }
  return status;
}

}  // namespace soak
}  // namespace terse
