#include "plugin/stream_proxy.h"

#include <utility>

#include "common/result.h"

namespace terse {

struct StreamProxy::State {
  std::mutex mutex;
  // Signalled when a unit becomes ready or finishes, and on stop.
  std::condition_variable changed;
  std::deque<std::shared_ptr<Unit>> queue;  // in issue order
  uint32_t* flag = nullptr;
  uint32_t last_sequence = 0;
  bool stopping = false;
  StopMode mode = StopMode::kFinish;
  Deadline deadline = Deadline::after_seconds(0);
};

class StreamProxy::Unit {
 public:
  std::shared_ptr<State> state;
  Work work;
  uint32_t sequence = 0;
  // Guarded by state->mutex.
  bool ready = false;
  bool finished = false;
  ncclResult_t result = ncclSuccess;
  std::string message;
};

namespace {

// Release ordering: whatever the proxy wrote before (the staged outputs) is visible to any
// reader that sees the new sequence, the GPU's stream included (x86 and Arm both order a
// release store after the stores before it, and PCIe reads of host memory are coherent).
void publish(uint32_t* flag, uint32_t sequence) {
  __atomic_store_n(flag, sequence, __ATOMIC_RELEASE);
}

}  // namespace

StreamProxy::StreamProxy(uint32_t* flag) : state_(std::make_shared<State>()) {
  state_->flag = flag;
  thread_ = std::thread([this] { run(); });
}

StreamProxy::~StreamProxy() {
  stop(StopMode::kAbandon);
  join();
}

ncclResult_t StreamProxy::enqueue(Work work, bool ready, std::shared_ptr<Unit>* unit,
                                  uint32_t* sequence) {
  auto created = std::make_shared<Unit>();
  created->state = state_;
  created->work = std::move(work);
  created->ready = ready;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->stopping) {
      return fail(ncclInvalidUsage,
                  "the communicator is being destroyed or aborted: no call can be queued on it");
    }
    created->sequence = ++state_->last_sequence;
    state_->queue.push_back(created);
  }
  if (ready) state_->changed.notify_all();
  *sequence = created->sequence;
  *unit = std::move(created);
  return ncclSuccess;
}

void StreamProxy::mark_ready(const std::shared_ptr<Unit>& unit) {
  State& state = *unit->state;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    unit->ready = true;
  }
  state.changed.notify_all();
}

ncclResult_t StreamProxy::wait(const std::shared_ptr<Unit>& unit) {
  State& state = *unit->state;
  std::unique_lock<std::mutex> lock(state.mutex);
  state.changed.wait(lock, [&] { return unit->finished; });
  if (unit->result == ncclSuccess) return ncclSuccess;
  return fail(unit->result, "%s", unit->message.c_str());
}

ncclResult_t StreamProxy::run_in_order(Work work) {
  std::shared_ptr<Unit> unit;
  uint32_t sequence = 0;
  TERSE_CHECK(enqueue(std::move(work), /*ready=*/true, &unit, &sequence));
  return wait(unit);
}

void StreamProxy::stop(StopMode mode, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->stopping || mode == StopMode::kAbandon) {
      state_->stopping = true;
      state_->mode = mode;
      state_->deadline = deadline;
    }
  }
  state_->changed.notify_all();
}

void StreamProxy::join() {
  if (thread_.joinable()) thread_.join();
}

uint32_t StreamProxy::last_sequence() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last_sequence;
}

void StreamProxy::run() {
  State& state = *state_;
  std::unique_lock<std::mutex> lock(state.mutex);
  for (;;) {
    // The head of the queue runs first, whichever unit became ready first: issue order is the
    // order in which the engine numbers operations, and it must be the same on every rank.
    bool give_up = false;
    while (!give_up && !(!state.queue.empty() && state.queue.front()->ready)) {
      if (state.stopping && state.mode == StopMode::kAbandon) {
        give_up = true;
      } else if (state.stopping) {
        give_up = state.queue.empty() || state.deadline.expired();
        if (!give_up) state.changed.wait_until(lock, state.deadline.when());
      } else {
        state.changed.wait(lock);
      }
    }
    if (give_up) break;
    std::shared_ptr<Unit> unit = std::move(state.queue.front());
    state.queue.pop_front();
    lock.unlock();
    clear_last_error();
    const ncclResult_t result = unit->work();
    std::string message = result == ncclSuccess ? std::string() : std::string(last_error());
    unit->work = nullptr;  // what it captured (staging, buffers) is no longer needed
    publish(state.flag, unit->sequence);
    lock.lock();
    unit->finished = true;
    unit->result = result;
    unit->message = std::move(message);
    state.changed.notify_all();
  }
  // Abandon the rest, publishing the last sequence so that no stream waits for them.
  if (!state.queue.empty()) {
    const char* reason = state.mode == StopMode::kAbandon
                             ? "the communicator was aborted before the stream reached this call"
                             : "the communicator was destroyed and the stream did not reach this "
                               "call before TERSE_TIMEOUT_S";
    for (const auto& unit : state.queue) {
      unit->finished = true;
      unit->result = ncclInvalidUsage;
      unit->message = reason;
      unit->work = nullptr;
    }
    state.queue.clear();
    publish(state.flag, state.last_sequence);
  }
  state.changed.notify_all();
}

}  // namespace terse
