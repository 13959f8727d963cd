// Runs the ranks of a multi-process test: one fresh process per rank (spawned, not forked, so
// UCX, the bootstrap and the signal state start clean in each), waited for together, killed
// when still running at the test's deadline, each one's output (stdout and stderr) kept so that a
// failing test can show what the rank said. Knows nothing of terse: the rank programs decide what
// the arguments mean and report through their exit codes.
#pragma once

#include <string>
#include <vector>

namespace terse {
namespace test {

struct RankProcessResult {
  int rank = -1;
  bool exited = false;  // false: killed by a signal (or by the parent at its deadline)
  int exit_code = -1;
  int signal = 0;
  bool killed_by_parent = false;  // at the deadline, or as the expendable rank
  double seconds = 0;             // from the spawn of all ranks to this one's exit
  std::string output;             // what it wrote to stdout and stderr (the last 16 KiB)
};

// One rank's command line: the program's path, then its arguments.
using CommandLine = std::vector<std::string>;

// Spawns one process per command line (environment inherited, output captured) and waits for
// all of them, killing any still running after `seconds_allowed`. `expendable_rank` (if >= 0)
// is killed as soon as every other rank has exited (a stopped process would never exit by
// itself).
std::vector<RankProcessResult> run_processes(const std::vector<CommandLine>& ranks,
                                             double seconds_allowed, int expendable_rank = -1);

// "rank 2 exited with 12", "... was killed by signal 9", then what it wrote.
std::string describe(const RankProcessResult& result);

}  // namespace test
}  // namespace terse
