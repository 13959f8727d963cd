// Ending a run that went wrong, so that nothing hangs: print why, ncclCommAbort every
// communicator of this process (which interrupts calls blocked in other threads, and lets the
// peers in other processes see this one leave), then exit with nccl-tests' code.
//
// The -T watchdog takes the same way out: every rank thread marks itself busy for the length
// of each NCCL call (CallTimer); a call busy for longer than -T seconds ends the run.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

namespace terse {
namespace perf {

// Exit codes, as nccl-tests' testResult_t values where it has one.
constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;         // a bad command line or launch environment
constexpr int kExitNoMemory = 2;      // the buffers could not be allocated (testCudaError)
constexpr int kExitNcclError = 3;     // an NCCL call failed (testNcclError)
constexpr int kExitTimeout = 4;       // -T expired (testTimeout)
constexpr int kExitWrongResults = 7;  // #wrong > 0 somewhere (testNumResults)

// The communicators to abort; set once they exist, cleared before they are destroyed.
void set_abortable_communicators(const std::vector<ncclComm_t>& comms);

// Prints `message` (a line) to stdout, aborts the communicators, exits with `code`. At most a
// few seconds even if an abort blocks. Safe from any thread; the first caller wins.
[[noreturn]] void abort_run(int code, const std::string& message);

// abort_run(kExitNcclError, ...) naming the call, the file and line, the error and
// ncclGetLastError, as nccl-tests words it, unless `result` is ncclSuccess.
void check_nccl(ncclResult_t result, const char* call, const char* file, int line);
#define TERSE_PERF_NCCL(call) ::terse::perf::check_nccl((call), #call, __FILE__, __LINE__)

// Starts the watchdog for `slots` rank threads; 0 seconds starts nothing.
void start_watchdog(int timeout_s, int slots);

// Marks rank thread `slot` busy in `what` (an NCCL call) for its lifetime.
class CallTimer {
 public:
  CallTimer(int slot, const char* what);
  ~CallTimer();
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  int slot_;
};

// This host's name up to the first dot, as nccl-tests prints it.
std::string short_host_name();

}  // namespace perf
}  // namespace terse
