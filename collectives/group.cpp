#include "collectives/group.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "common/exception_guard.h"
#include "common/joining_threads.h"
#include "common/result.h"

namespace terse {
namespace {

struct GroupState {
  int depth = 0;
  // Calls by communicator, communicators in the order they first appeared.
  std::vector<std::pair<Communicator*, std::vector<CollectiveArgs>>> batches;
  ncclResult_t error = ncclSuccess;  // the first argument error inside this group
  std::string error_message;
};

GroupState& group_state() {
  thread_local GroupState state;
  return state;
}

void queue(GroupState& state, Communicator* comm, const CollectiveArgs& args) {
  for (auto& batch : state.batches) {
    if (batch.first == comm) {
      batch.second.push_back(args);
      return;
    }
  }
  state.batches.emplace_back(comm, std::vector<CollectiveArgs>{args});
}

struct BatchOutcome {
  ncclResult_t result = ncclSuccess;
  std::string message;
};

BatchOutcome run_batch(Communicator* comm, const std::vector<CollectiveArgs>& calls) {
  BatchOutcome outcome;
  outcome.result = comm->run_batch(calls);
  if (outcome.result != ncclSuccess) outcome.message = last_error();
  return outcome;
}

}  // namespace

int group_depth() {
  return group_state().depth;
}

ncclResult_t group_start() {
  ++group_state().depth;
  return ncclSuccess;
}

ncclResult_t group_end() {
  GroupState& state = group_state();
  if (state.depth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  }
  if (--state.depth > 0) return ncclSuccess;

  auto batches = std::move(state.batches);
  state.batches.clear();
  const ncclResult_t argument_error = state.error;
  const std::string argument_message = std::move(state.error_message);
  state.error = ncclSuccess;
  state.error_message.clear();
  if (argument_error != ncclSuccess) {
    return fail(argument_error, "the group ran nothing because a call in it failed: %s",
                argument_message.c_str());
  }
  if (batches.empty()) return ncclSuccess;

  std::vector<BatchOutcome> outcomes(batches.size());
  JoiningThreads threads(batches.size());
  for (size_t i = 1; i < batches.size(); ++i) {
    threads.start([&, i] {
      // run_batch records its failure in the outcome; an exception is recorded here.
      outcomes[i].result = call_guarded(
          "ncclGroupEnd",
          [&] {
            outcomes[i] = run_batch(batches[i].first, batches[i].second);
            return outcomes[i].result;
          },
          &outcomes[i].message);
    });
  }
  outcomes[0] = run_batch(batches[0].first, batches[0].second);
  threads.join();
  // The first batch ran on this thread, so its message is already this thread's last error;
  // the others' messages are moved here, where ncclGetLastError will look for them.
  if (outcomes[0].result != ncclSuccess) return outcomes[0].result;
  for (const BatchOutcome& outcome : outcomes) {
    if (outcome.result != ncclSuccess) return fail(outcome.result, "%s", outcome.message.c_str());
  }
  return ncclSuccess;
}

ncclResult_t submit(Communicator* comm, const CollectiveArgs& args) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "communicator is NULL");
  GroupState& state = group_state();
  const ncclResult_t checked = comm->check_arguments(args);
  if (checked != ncclSuccess) {
    if (state.depth > 0 && state.error == ncclSuccess) {
      state.error = checked;
      state.error_message = last_error();
    }
    return checked;
  }
  if (state.depth == 0) return comm->run(args);
  queue(state, comm, args);
  return ncclSuccess;
}

}  // namespace terse
