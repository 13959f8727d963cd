// The soak's launcher: the ranks as processes of this machine, each a fresh copy of this program
// (posix_spawn of /proc/self/exe, so UCX and the bootstrap start clean in each). The caller made
// the unique id first (ncclGetUniqueId, whose bootstrap root then listens in the caller until
// every rank came), so no port is chosen before the process that binds it; each rank's output
// goes straight to the caller's stdout and stderr.
#pragma once

#include <string>
#include <vector>

namespace terse {
namespace soak {

// Runs `/proc/self/exe <arguments of rank r>` for every r at once and waits for all of them.
// When one fails, the others are sent SIGTERM (the ranks this launcher spawned, by pid), unless
// its exit code is `agreed_code`: a verdict every rank reaches together, each exiting with it.
// Returns 0 when all exited 0, else the first failure's exit code (128 + the signal for a
// signal).
int run_ranks(const std::vector<std::vector<std::string>>& arguments, int agreed_code);

}  // namespace soak
}  // namespace terse
