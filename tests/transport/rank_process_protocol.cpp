#include "rank_process_protocol.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

extern char** environ;

namespace terse {
namespace test {

std::string unique_id_to_hex(const UniqueId& id) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    uint8_t byte = static_cast<uint8_t>(id.internal[i]);
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

bool unique_id_from_hex(const std::string& hex, UniqueId* id) {
  if (hex.size() != 2 * kUniqueIdBytes) return false;
  auto value = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    int high = value(hex[2 * i]), low = value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    id->internal[i] = static_cast<char>(high * 16 + low);
  }
  return true;
}

std::vector<RankProcessResult> run_rank_processes(const char* scenario, int nranks,
                                                  const UniqueId& id, double seconds_allowed,
                                                  int expendable_rank) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::string hex = unique_id_to_hex(id);
  const std::string nranks_text = std::to_string(nranks);
  std::vector<pid_t> pids(nranks, -1);
  std::vector<RankProcessResult> results(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    results[rank].rank = rank;
    std::string rank_text = std::to_string(rank);
    const char* argv[] = {TERSE_RANK_PROCESS_PATH, scenario,    rank_text.c_str(),
                          nranks_text.c_str(),     hex.c_str(), nullptr};
    if (posix_spawn(&pids[rank], TERSE_RANK_PROCESS_PATH, nullptr, nullptr,
                    const_cast<char* const*>(argv), environ) != 0) {
      pids[rank] = -1;
    }
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
  return results;
}

std::string describe(const RankProcessResult& result) {
  std::string text = "rank " + std::to_string(result.rank);
  if (result.exited) return text + " exited with " + std::to_string(result.exit_code);
  if (result.killed_by_parent) return text + " was still running at the test's deadline (killed)";
  if (result.signal != 0) return text + " was killed by signal " + std::to_string(result.signal);
  return text + " could not be started";
}

}  // namespace test
}  // namespace terse
