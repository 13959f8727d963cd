// The "init-result" scenario of plugin_rank_process: creates the communicator and says what
// happened instead of judging it, so that the test, which gave the ranks their environments,
// decides whether a refusal was right (plugin_rank_protocol.h has the output lines). The exit
// code reports only what this rank can judge alone: an allreduce on a communicator that was
// created must be exact.
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugin_rank_protocol.h"

namespace plugin_test {
namespace {

int fail_with(int rank, const std::string& what) {
  fprintf(stderr, "plugin_rank_process rank %d: %s\n", rank, what.c_str());
  return kPluginRankWrongResult;
}

// One line each, flushed at once: the test reads them even if the process dies afterwards.
void print_result(const char* what, ncclResult_t result, double seconds) {
  printf("%s result: %d (%s) after %.3f s\n", what, static_cast<int>(result),
         ncclGetErrorString(result), seconds);
  printf("%s message: %s\n", what, result == ncclSuccess ? "" : ncclGetLastError(nullptr));
  fflush(stdout);
}

// Integers are never compressed, so the sum is exact whatever the codec settings say.
int exact_allreduce(ncclComm_t comm, int rank, int nranks, const char* what) {
  std::vector<int32_t> values(4099, rank + 1);
  const ncclResult_t result =
      ncclAllReduce(values.data(), values.data(), values.size(), ncclInt32, ncclSum, comm, nullptr);
  if (result != ncclSuccess) {
    return fail_with(rank, std::string(what) + " allreduce failed: " + ncclGetLastError(nullptr));
  }
  for (int32_t value : values) {
    if (value != nranks * (nranks + 1) / 2) {
      return fail_with(rank, std::string(what) + " allreduce gave " + std::to_string(value));
    }
  }
  return kPluginRankOk;
}

ncclResult_t create(const ncclUniqueId& id, int rank, int nranks, ncclComm_t* comm) {
  const char* call = getenv("PLUGIN_TEST_INIT_CALL");
  const std::string how = call != nullptr ? call : "";
  if (how == "config") {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    return ncclCommInitRankConfig(comm, nranks, id, rank, &config);
  }
  if (how == "group") {
    const ncclResult_t started = ncclGroupStart();
    if (started != ncclSuccess) return started;
    const ncclResult_t queued = ncclCommInitRank(comm, nranks, id, rank);
    const ncclResult_t ended = ncclGroupEnd();
    return queued != ncclSuccess ? queued : ended;
  }
  return ncclCommInitRank(comm, nranks, id, rank);
}

// ncclCommSplit of every rank into one color, after this rank's PLUGIN_TEST_SPLIT_ENV (if any)
// changed its environment: the child communicator compares the settings again.
int split_and_report(ncclComm_t comm, int rank, int nranks) {
  if (const char* assignment = getenv("PLUGIN_TEST_SPLIT_ENV")) {
    const std::string text = assignment;
    const size_t equals = text.find('=');
    if (equals == std::string::npos)
      return fail_with(rank, "PLUGIN_TEST_SPLIT_ENV is not NAME=value");
    setenv(text.substr(0, equals).c_str(), text.substr(equals + 1).c_str(), 1);
  }
  const auto started = std::chrono::steady_clock::now();
  ncclComm_t child = nullptr;
  const ncclResult_t result = ncclCommSplit(comm, 0, rank, &child, nullptr);
  print_result("split", result,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (result == ncclSuccess) {
    const int code = exact_allreduce(child, rank, nranks, "the child's");
    ncclCommDestroy(child);
    if (code != kPluginRankOk) return code;
  }
  return exact_allreduce(comm, rank, nranks, "the parent's (after the split)");
}

}  // namespace

int run_init_result(const ncclUniqueId& id, int rank, int nranks) {
  const auto started = std::chrono::steady_clock::now();
  ncclComm_t comm = nullptr;
  const ncclResult_t result = create(id, rank, nranks, &comm);
  print_result("init", result,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (result != ncclSuccess) {
    // A group's deferred init hands out its communicator before it fails at ncclGroupEnd.
    if (comm != nullptr) ncclCommAbort(comm);
    return kPluginRankOk;
  }
  int code = exact_allreduce(comm, rank, nranks, "the new communicator's");
  if (code == kPluginRankOk) code = split_and_report(comm, rank, nranks);
  if (ncclCommDestroy(comm) != ncclSuccess && code == kPluginRankOk) {
    code = fail_with(rank, "ncclCommDestroy failed");
  }
  return code;
}

}  // namespace plugin_test
