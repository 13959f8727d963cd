#include "collective_cases.h"

#include <gtest/gtest.h>

#include <string>

namespace terse {
namespace test {

void run_collective_cases(CommunicatorWorld& world, const std::vector<CollectiveCase>& cases) {
  ASSERT_TRUE(world.ok()) << world.error();
  // References once, on this thread: every rank checks against the same one.
  std::vector<Reference> references;
  for (const CollectiveCase& c : cases) references.push_back(reference_for(c, world.nranks()));
  world.run([&](Communicator& comm) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const CaseOutcome outcome = run_collective_case(comm, cases[i], references[i]);
      for (const std::string& failure : outcome.failures) ADD_FAILURE() << failure;
      // A rank that failed hard leaves the others waiting: stop here, they time out.
      if (outcome.call_failed) FAIL() << "rank " << comm.rank() << " stops at its failed call";
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

}  // namespace test
}  // namespace terse
