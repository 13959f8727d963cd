#include "plugin/call_routing.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/group.h"
#include "common/result.h"
#include "plugin/nccl_comm.h"

namespace terse {
namespace {

// The steps the hand-offs of an open group took on one communicator (wrap mode): the group's
// alone until its end (CompressionEngine::PendingSteps).
using GroupSteps = std::pair<ncclComm*, std::unique_ptr<CompressionEngine::PendingSteps>>;

struct ApiGroup {
  int depth = 0;
  std::vector<std::pair<ncclComm*, QueuedCall>> calls;  // in issue order
  ncclResult_t error = ncclSuccess;                     // the first refusal inside the group
  std::string error_message;
  std::vector<GroupSteps> steps;  // communicators with hand-offs, each once
};

// An outermost group taken off the thread's queue: its calls and hand-offs, each holding a use
// of its communicator until this goes.
struct EndedGroup {
  std::vector<std::pair<ncclComm*, QueuedCall>> calls;
  std::vector<GroupSteps> steps;
  ncclResult_t refused = ncclSuccess;
  std::string refused_message;

  EndedGroup() = default;
  EndedGroup(const EndedGroup&) = delete;
  EndedGroup& operator=(const EndedGroup&) = delete;
  ~EndedGroup() {
    for (auto& queued : calls) release_comm(queued.first);
    for (auto& held : steps) release_comm(held.first);
  }
};

ApiGroup& api_group() {
  thread_local ApiGroup group;
  return group;
}

DeviceStaging* existing_staging(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->staging_mutex);
  return comm->staging.get();
}

ncclResult_t staging_for(ncclComm* comm, DeviceStaging** out) {
  std::lock_guard<std::mutex> lock(comm->staging_mutex);
  if (comm->staging == nullptr) {
    TERSE_CHECK(DeviceStaging::create(comm->engine.get(), &comm->staging));
  }
  *out = comm->staging.get();
  return ncclSuccess;
}

// A host-buffer call that moves data: it completes before the call (or ncclGroupEnd) returns.
bool completes_on_return(const QueuedCall& call) {
  return !call.on_device && call.args.count > 0;
}

// Device calls report failures only asynchronously, so a communicator that is already broken
// refuses them here, as the engine refuses host calls.
ncclResult_t check_not_broken(const Communicator& engine) {
  const ncclResult_t broken = engine.async_error();
  if (broken == ncclSuccess) return ncclSuccess;
  return fail(broken, "rank %d: the communicator failed earlier and must be aborted: %s",
              engine.rank(), engine.async_error_message().c_str());
}

// Whether a call outside a group goes to the device backend (backend_route.h): an allreduce of
// device buffers that the engine expects to run there. A PreMulSum scalar in device memory is
// read from the staging, so such calls stay staged.
ncclResult_t takes_backend_route(Communicator* engine, const QueuedCall& call, bool* backend) {
  *backend = false;
  if (!call.on_device || call.args.kind != CollectiveKind::kAllReduce || call.args.count == 0 ||
      call.device_scalar != nullptr) {
    return ncclSuccess;
  }
  return engine->compression()->predicts_backend(call.args, backend);
}

struct CommunicatorCalls {
  ncclComm* comm = nullptr;
  std::vector<QueuedCall> calls;
  bool device = false;               // some call has device buffers
  bool completes_on_return = false;  // some call has host buffers with data
  DeviceStaging* staging = nullptr;  // set when its calls go through staging
  std::shared_ptr<DeviceStaging::Batch> batch;
};

ncclResult_t run_group(const std::vector<std::pair<ncclComm*, QueuedCall>>& queued) {
  std::vector<CommunicatorCalls> comms;
  for (auto& [comm, call] : queued) {
    auto found = comms.begin();
    while (found != comms.end() && found->comm != comm) ++found;
    if (found == comms.end()) {
      comms.emplace_back();
      comms.back().comm = comm;
      found = comms.end() - 1;
    }
    found->device = found->device || call.on_device;
    found->completes_on_return = found->completes_on_return || completes_on_return(call);
    found->calls.push_back(call);
  }
  // Staging first, so that a communicator that cannot have it fails the group before anything
  // has run.
  for (CommunicatorCalls& entry : comms) {
    if (entry.device) {
      TERSE_CHECK(check_not_broken(*entry.comm->engine));
      TERSE_CHECK(staging_for(entry.comm, &entry.staging));
    } else {
      entry.staging = existing_staging(entry.comm);
    }
  }

  ncclResult_t first_error = ncclSuccess;
  std::string first_message;
  auto note = [&](ncclResult_t result) {
    if (result != ncclSuccess && first_error == ncclSuccess) {
      first_error = result;
      first_message = last_error();
    }
  };
  for (CommunicatorCalls& entry : comms) {
    if (entry.staging != nullptr) note(entry.staging->stage_inputs(entry.calls, &entry.batch));
  }
  for (CommunicatorCalls& entry : comms) {
    if (entry.batch != nullptr) note(entry.staging->stage_outputs(entry.batch));
  }
  bool host_only = false;
  for (const CommunicatorCalls& entry : comms) host_only = host_only || entry.staging == nullptr;
  if (host_only) {
    group_start();
    for (const CommunicatorCalls& entry : comms) {
      if (entry.staging != nullptr) continue;
      for (const QueuedCall& call : entry.calls) note(submit(entry.comm->engine.get(), call.args));
    }
    note(group_end());
  }
  for (CommunicatorCalls& entry : comms) {
    if (entry.batch != nullptr && entry.completes_on_return) {
      note(DeviceStaging::wait(entry.batch));
    }
  }
  if (first_error == ncclSuccess) return ncclSuccess;
  return fail(first_error, "%s", first_message.c_str());
}

}  // namespace

ncclResult_t route_call(ncclComm* comm, const QueuedCall& call) {
  ApiGroup& group = api_group();
  Communicator* engine = comm->engine.get();
  if (call.on_device) TERSE_CHECK(check_not_broken(*engine));
  if (group.depth > 0) {
    // The queued call keeps its communicator alive until ncclGroupEnd has run it.
    TERSE_CHECK(acquire_comm(comm, "a call queued in a group"));
    try {
      group.calls.emplace_back(comm, call);
    } catch (...) {
      release_comm(comm);
      throw;
    }
    return ncclSuccess;
  }
  DeviceStaging* staging = nullptr;
  if (call.on_device) {
    TERSE_CHECK(staging_for(comm, &staging));
  } else {
    staging = existing_staging(comm);
  }
  if (staging == nullptr) return engine->run(call.args);
  bool backend = false;
  TERSE_CHECK(takes_backend_route(engine, call, &backend));
  if (backend) return staging->run_on_backend(call);
  std::shared_ptr<DeviceStaging::Batch> batch;
  TERSE_CHECK(staging->stage_inputs({call}, &batch));
  TERSE_CHECK(staging->stage_outputs(batch));
  return completes_on_return(call) ? DeviceStaging::wait(batch) : ncclSuccess;
}

void begin_api_group() {
  ++api_group().depth;
}

namespace {

// Moves the thread's outermost group into `ended` (the queue starts empty again).
void take_group(ApiGroup* group, EndedGroup* ended) {
  ended->calls = std::move(group->calls);
  group->calls.clear();
  ended->steps = std::move(group->steps);
  group->steps.clear();
  ended->refused = group->error;
  ended->refused_message = std::move(group->error_message);
  group->error = ncclSuccess;
  group->error_message.clear();
}

// One level less of the thread's group; at the outermost level its calls move into `ended` and
// *outermost is set.
ncclResult_t close_level(const char* function, bool* outermost, EndedGroup* ended) {
  *outermost = false;
  ApiGroup& group = api_group();
  if (group.depth == 0) {
    return fail(ncclInvalidUsage, "%s without a matching ncclGroupStart", function);
  }
  if (--group.depth > 0) return ncclSuccess;
  *outermost = true;
  take_group(&group, ended);
  return ncclSuccess;
}

}  // namespace

ncclResult_t end_api_group(bool hand_offs_ran) {
  bool outermost = false;
  // Each queued call's use of its communicator ends when the group has run (or refused) it.
  EndedGroup ended;
  TERSE_CHECK(close_level("ncclGroupEnd", &outermost, &ended));
  if (!outermost) return ncclSuccess;
  // The real NCCL's group has ended (group_calls.cpp ends it first): the calls handed to it ran
  // there, and count as their tensors' steps before terse's calls run. When it failed, they
  // did not run, and are dropped with the group.
  if (hand_offs_ran) {
    for (auto& [comm, steps] : ended.steps) comm->engine->compression()->commit(steps.get());
  }
  if (ended.refused != ncclSuccess) {
    return fail(ended.refused, "the group ran nothing because a call in it failed: %s",
                ended.refused_message.c_str());
  }
  if (ended.calls.empty()) return ncclSuccess;
  return run_group(ended.calls);
}

ncclResult_t simulate_api_group(double* seconds, size_t* simulated) {
  *seconds = 0;
  *simulated = 0;
  bool outermost = false;
  // Nothing of the group runs: its calls and the steps its hand-offs took go with `ended`.
  EndedGroup ended;
  TERSE_CHECK(close_level("ncclGroupSimulateEnd", &outermost, &ended));
  if (!outermost) return ncclSuccess;
  if (ended.refused != ncclSuccess) {
    return fail(ended.refused,
                "the simulated group predicted nothing because a call in it failed: %s",
                ended.refused_message.c_str());
  }
  // Each communicator's calls are planned after the steps the group took before them (its
  // hand-offs, its earlier calls), in steps of the group's own: the engine never sees them.
  std::vector<GroupSteps>& steps = ended.steps;
  std::vector<GroupSteps> simulated_only;  // communicators without hand-offs
  for (auto& [comm, call] : ended.calls) {
    const auto owner = [&, comm = comm](const GroupSteps& held) { return held.first == comm; };
    auto found = std::find_if(steps.begin(), steps.end(), owner);
    CompressionEngine::PendingSteps* pending = nullptr;
    if (found != steps.end()) {
      pending = found->second.get();
    } else {
      auto other = std::find_if(simulated_only.begin(), simulated_only.end(), owner);
      if (other == simulated_only.end()) {
        // The queued call holds the use of `comm` that this needs.
        simulated_only.emplace_back(comm, std::make_unique<CompressionEngine::PendingSteps>());
        other = simulated_only.end() - 1;
      }
      pending = other->second.get();
    }
    double call_seconds = 0;
    TERSE_CHECK(comm->engine->simulate(call.args, pending, &call_seconds));
    *seconds += call_seconds;
  }
  *simulated = ended.calls.size();
  return ncclSuccess;
}

ncclResult_t discard_api_group() {
  bool outermost = false;
  EndedGroup ended;
  TERSE_CHECK(close_level("ncclGroupSimulateEnd", &outermost, &ended));
  if (ended.refused != ncclSuccess) {
    return fail(ended.refused, "the group ran nothing because a call in it failed: %s",
                ended.refused_message.c_str());
  }
  return ncclSuccess;
}

int api_group_depth() {
  return api_group().depth;
}

ncclResult_t group_steps(ncclComm* comm, CompressionEngine::PendingSteps** steps) {
  ApiGroup& group = api_group();
  for (GroupSteps& held : group.steps) {
    if (held.first == comm) {
      *steps = held.second.get();
      return ncclSuccess;
    }
  }
  TERSE_CHECK(acquire_comm(comm, "a call handed to the real NCCL in a group"));
  try {
    group.steps.emplace_back(comm, std::make_unique<CompressionEngine::PendingSteps>());
  } catch (...) {
    release_comm(comm);
    throw;
  }
  *steps = group.steps.back().second.get();
  return ncclSuccess;
}

void refuse_in_group(ncclResult_t result) {
  ApiGroup& group = api_group();
  if (group.depth == 0 || group.error != ncclSuccess) return;
  group.error = result;
  group.error_message = last_error();
}

ncclResult_t run_in_call_order(ncclComm* comm, const std::function<ncclResult_t()>& work) {
  DeviceStaging* staging = existing_staging(comm);
  if (staging == nullptr) return work();
  bool cancelled = false;
  const ncclResult_t result = staging->proxy().run_in_order(work, &cancelled);
  // Given up on before it ran: this rank is one operation behind its peers.
  if (cancelled) comm->engine->break_with(result);
  return result;
}

}  // namespace terse
