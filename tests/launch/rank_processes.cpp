#include "rank_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

extern char** environ;

namespace terse {
namespace test {
namespace {

constexpr size_t kOutputBytesKept = 16 << 10;

// An unnamed file for one rank's output: created, unlinked at once (nothing is left behind
// whatever happens to the test), read back by descriptor.
int anonymous_file() {
  const char* directory = getenv("TMPDIR");
  std::string path = std::string(directory != nullptr && *directory ? directory : "/tmp") +
                     "/terse-rank-output-XXXXXX";
  int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd >= 0) unlink(path.c_str());
  return fd;
}

std::string read_tail(int fd) {
  if (fd < 0) return "";
  const off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  const off_t start =
      size > static_cast<off_t>(kOutputBytesKept) ? size - static_cast<off_t>(kOutputBytesKept) : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  ssize_t got = pread(fd, text.data(), text.size(), start);
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return start > 0 ? "[...]" + text : text;
}

// Starts `command` with its stdout and stderr going to `output_fd` (if >= 0); -1 when it
// cannot.
pid_t spawn(const CommandLine& command, int output_fd) {
  std::vector<char*> argv;
  for (const std::string& argument : command) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (output_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, output_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, output_fd, STDERR_FILENO);
  }
  pid_t pid = -1;
  if (argv[0] == nullptr ||
      posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace

std::vector<RankProcessResult> run_processes(const std::vector<CommandLine>& ranks,
                                             double seconds_allowed, int expendable_rank) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int nranks = static_cast<int>(ranks.size());
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> output_fds(nranks, -1);
  std::vector<RankProcessResult> results(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    results[rank].rank = rank;
    output_fds[rank] = anonymous_file();
    pids[rank] = spawn(ranks[rank], output_fds[rank]);
  }
  const auto deadline = start + std::chrono::duration<double>(seconds_allowed);
  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
  while (running > 0) {
    const bool late = Clock::now() >= deadline;
    const bool only_expendable_left = running == 1 && expendable_rank >= 0 &&
                                      expendable_rank < nranks && pids[expendable_rank] > 0;
    for (int rank = 0; rank < nranks; ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      pid_t done = waitpid(pids[rank], &status, WNOHANG);
      if (done == 0) {
        // Still running: past the deadline it is killed and reaped on a later pass.
        if ((late || only_expendable_left) && !results[rank].killed_by_parent) {
          kill(pids[rank], SIGKILL);
          results[rank].killed_by_parent = true;
        }
        continue;
      }
      if (done < 0 && errno == EINTR) continue;
      RankProcessResult& result = results[rank];
      result.exited = done > 0 && WIFEXITED(status);
      result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
      result.signal = done > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      pids[rank] = -1;
      --running;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int rank = 0; rank < nranks; ++rank) {
    results[rank].output = read_tail(output_fds[rank]);
    if (output_fds[rank] >= 0) close(output_fds[rank]);
  }
  return results;
}

std::string describe(const RankProcessResult& result) {
  std::string text = "rank " + std::to_string(result.rank);
  if (result.exited) {
    text += " exited with " + std::to_string(result.exit_code);
  } else if (result.killed_by_parent) {
    text += " was still running when the test stopped it (killed)";
  } else if (result.signal != 0) {
    text += " was killed by signal " + std::to_string(result.signal);
  } else {
    text += " could not be started";
  }
  if (!result.output.empty()) text += "; its output:\n" + result.output;
  return text;
}

}  // namespace test
}  // namespace terse
