// Out of memory at every step: the C API answers every injected allocation failure with an error
// code and a sentence, never an exception, and the process lives on (a background thread that
// let one out would end it). Each sweep runs a sequence of calls once to count its allocations,
// then again with the k-th allocation failing, for k across the whole sequence.
#include <nccl.h>
#include <terse/terse.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "failing_new.h"

namespace {

// What one step of a sequence returned.
struct Step {
  const char* call;
  ncclResult_t result;
  std::string message;
};

class Sequence {
 public:
  // Runs `call` unless an earlier step failed; an exception is a test failure, named.
  bool run(const char* call, const std::function<ncclResult_t()>& body) {
    if (stopped_) return false;
    ncclResult_t result = ncclInternalError;
    try {
      failing_new::resume();
      result = body();
      failing_new::pause();
    } catch (...) {
      failing_new::disarm();
      ADD_FAILURE() << call << " let an exception out of the C API";
      stopped_ = true;
      return false;
    }
    steps_.push_back({call, result, result == ncclSuccess ? "" : ncclGetLastError(nullptr)});
    if (result != ncclSuccess) stopped_ = true;
    return result == ncclSuccess;
  }
  const std::vector<Step>& steps() const { return steps_; }

 private:
  bool stopped_ = false;
  std::vector<Step> steps_;
};

// One rank: unique id, init, plain and compressed allreduces on host buffers, the statistics,
// a split, finalize, destroy. Leaves nothing behind whatever failed.
void single_rank_sequence(Sequence* sequence) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr, child = nullptr;
  std::vector<float> data(4096, 1.5f);
  terseTensor tensor = {};
  tensor.name = "layer0.weight.grad";
  tensor.codec = "int8";
  terseStats stats{};
  sequence->run("ncclGetUniqueId", [&] { return ncclGetUniqueId(&id); }) &&
      sequence->run("ncclCommInitRank", [&] { return ncclCommInitRank(&comm, 1, id, 0); }) &&
      sequence->run("ncclAllReduce",
                    [&] {
                      return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32,
                                           ncclSum, comm, nullptr);
                    }) &&
      sequence->run("terseAllReduceTensor",
                    [&] {
                      return terseAllReduceTensor(data.data(), data.data(), data.size(),
                                                  ncclFloat32, ncclSum, &tensor, comm, nullptr);
                    }) &&
      sequence->run("terseCommGetStats", [&] { return terseCommGetStats(comm, &stats); }) &&
      sequence->run("ncclCommSplit", [&] { return ncclCommSplit(comm, 0, 0, &child, nullptr); }) &&
      sequence->run("ncclCommFinalize", [&] { return ncclCommFinalize(child); }) &&
      sequence->run("ncclCommDestroy", [&] {
        ncclResult_t result = ncclCommDestroy(child);
        child = nullptr;
        return result;
      });
  failing_new::disarm();
  // Whatever was created goes, with allocation working again.
  if (child != nullptr) {
    EXPECT_EQ(ncclCommAbort(child), ncclSuccess);
  }
  if (comm != nullptr) {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

TEST(AllocationFailures, EveryCallOfOneRankAnswersWithACodeAndASentence) {
  setenv("TERSE_SOCKET_IFNAME", "lo", 1);
  // A failure in the bootstrap root's thread leaves the rank waiting for its deadline.
  setenv("TERSE_TIMEOUT_S", "2", 1);
  // How many allocations the sequence makes when none fails.
  long total = 0;
  {
    Sequence sequence;
    failing_new::arm(0);
    single_rank_sequence(&sequence);
    total = failing_new::counted();
    ASSERT_EQ(sequence.steps().size(), 8u);
    for (const Step& step : sequence.steps()) ASSERT_EQ(step.result, ncclSuccess) << step.call;
  }
  ASSERT_GT(total, 50);
  // Every allocation with TERSE_ALLOC_SWEEP=all (minutes: a few hundred inits); in the suite
  // every one of the first 40 (argument checks, unique id, the start of init) and 60 spread
  // evenly over the rest.
  const char* sweep = getenv("TERSE_ALLOC_SWEEP");
  const bool all = sweep != nullptr && std::string(sweep) == "all";
  std::vector<long> nths;
  const long dense = all ? total : std::min<long>(total, 40);
  for (long nth = 1; nth <= dense; ++nth) nths.push_back(nth);
  for (long nth = dense + 1; nth <= total; nth += std::max<long>(1, (total - dense) / 60)) {
    nths.push_back(nth);
  }
  int refused_as_out_of_memory = 0, root_gave_up = 0;
  for (long nth : nths) {
    Sequence sequence;
    failing_new::arm(nth);
    single_rank_sequence(&sequence);
    for (const Step& step : sequence.steps()) {
      if (step.result == ncclSuccess) continue;
      // The failure is reported, by a code a caller can act on, with a sentence.
      EXPECT_NE(step.message, "") << step.call << " failed at allocation " << nth;
      EXPECT_TRUE(step.result == ncclSystemError || step.result == ncclInternalError ||
                  step.result == ncclRemoteError)
          << step.call << " at allocation " << nth << ": " << ncclGetErrorString(step.result)
          << ": " << step.message;
      if (step.result == ncclSystemError &&
          step.message.find("out of memory") != std::string::npos) {
        ++refused_as_out_of_memory;
      }
      // A bootstrap root of this process that gave up fails the rank at once, saying so, rather
      // than leaving it to retry until its deadline.
      EXPECT_EQ(step.message.find("within the deadline"), std::string::npos)
          << step.call << " at allocation " << nth << ": " << step.message;
      if (step.message.find("gave up the rendezvous") != std::string::npos) ++root_gave_up;
    }
  }
  printf(
      "%zu sweeps over %ld allocations; %d calls answered out of memory, %d that the root gave "
      "up\n",
      nths.size(), total, refused_as_out_of_memory, root_gave_up);
  // The injected failures reached the C API's own threads' calls, not only background threads,
  // and the bootstrap root's.
  EXPECT_GT(refused_as_out_of_memory, 0);
  EXPECT_GT(root_gave_up, 0);
}

}  // namespace
