// Runs N ranks as threads through the public NCCL API of libterse.so (nothing of terse's C++ is
// visible here: the tests see only what an application sees).
#pragma once

#include <nccl.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace plugin_test {

// Whether `result` is a failure; if so the test fails with the call's name and this thread's
// ncclGetLastError (gtest assertions may be made from any thread).
inline bool failed(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return false;
  ADD_FAILURE() << call << ": " << ncclGetErrorString(result) << ": " << ncclGetLastError(nullptr);
  return true;
}

// Each rank: ncclCommInitRank on its own thread with one shared id, then `body(rank, comm)`,
// then ncclCommDestroy. Returns the first rank's failure text ("" when all succeeded).
inline std::string run_ranks(int nranks, const std::function<void(int, ncclComm_t)>& body) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess)
    return std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        errors[rank] = std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr);
        return;
      }
      body(rank, comm);
      if (ncclCommDestroy(comm) != ncclSuccess) errors[rank] = "ncclCommDestroy failed";
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (!error.empty()) return error;
  }
  return "";
}

}  // namespace plugin_test
