// Scenario "all-collectives": the thread tests' case lists, run by ranks as processes.
#include <cstdio>
#include <string>
#include <vector>

#include "collective_case_lists.h"
#include "rank_process_protocol.h"
#include "rank_scenarios.h"

namespace terse {
namespace test {
namespace {

// Every rank count runs the whole list (8 processes take a few seconds on 2 cores), except the
// 16 MiB case: each rank process computes its own float64 reference of it (every rank's input,
// per element) and holds 2 x 16 MiB of buffers besides, so it runs only up to 4 ranks and keeps
// the suite's time and memory modest on a small machine (the thread tests take 8 MiB allreduces
// to 8 ranks).
constexpr int kLargeCaseMaxRanks = 4;
constexpr size_t kMaxLinesShown = 20;

void append(std::vector<CollectiveCase>* to, const std::vector<CollectiveCase>& cases) {
  to->insert(to->end(), cases.begin(), cases.end());
}

}  // namespace

int run_all_collectives(Communicator& comm) {
  const int rank = comm.rank(), nranks = comm.nranks();
  std::vector<CollectiveCase> cases;
  append(&cases, data_movement_cases(nranks));
  append(&cases, reduction_cases(nranks));
  append(&cases, allreduce_cases(nranks));
  append(&cases, several_mib_cases(nranks));
  if (nranks <= kLargeCaseMaxRanks) cases.push_back(large_allreduce_case());

  size_t wrong_cases = 0, lines_shown = 0;
  for (const CollectiveCase& c : cases) {
    const CaseOutcome outcome = run_collective_case(comm, c, reference_for(c, nranks));
    wrong_cases += !outcome.failures.empty();
    for (const std::string& failure : outcome.failures) {
      if (lines_shown++ < kMaxLinesShown) fprintf(stderr, "%s\n", failure.c_str());
    }
    // The others may now wait for this rank until their deadline: stop, they will too.
    if (outcome.call_failed) {
      return report(kRankExchangeFailed, rank, "stopped at the failed call: " + describe(c));
    }
  }
  if (wrong_cases > 0) {
    return report(kRankExchangeFailed, rank,
                  std::to_string(wrong_cases) + " of " + std::to_string(cases.size()) +
                      " cases gave wrong results");
  }
  fprintf(stderr, "collective_rank_process rank %d: %zu cases correct\n", rank, cases.size());
  return kRankOk;
}

}  // namespace test
}  // namespace terse
