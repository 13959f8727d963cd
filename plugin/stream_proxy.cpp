#include "plugin/stream_proxy.h"

#include <utility>

#include "common/exception_guard.h"
#include "common/result.h"
#include "common/thread_name.h"

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
  double wait_seconds = 600;
};

class StreamProxy::Unit {
 public:
  std::shared_ptr<State> state;
  Work work;
  uint32_t sequence = 0;
  // Guarded by state->mutex.
  bool ready = false;
  bool started = false;
  bool cancelled = false;  // by a waiter that gave up before it started: never runs
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

StreamProxy::StreamProxy(uint32_t* flag, double wait_seconds) : state_(std::make_shared<State>()) {
  state_->flag = flag;
  state_->wait_seconds = wait_seconds;
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
  const Deadline deadline = Deadline::after_seconds(state.wait_seconds);
  if (!state.changed.wait_until(lock, deadline.when(), [&] { return unit->finished; })) {
    if (!unit->started) {
      unit->cancelled = true;
      unit->ready = true;  // at the head, the proxy skips it at once
      unit->finished = true;
      unit->result = ncclSystemError;
      state.changed.notify_all();
      return fail(ncclSystemError,
                  "a call waited %.0f s (TERSE_TIMEOUT_S) behind calls queued before it on this "
                  "communicator whose streams never reached them; it was cancelled, and the "
                  "communicator is out of step with its peers and must be aborted",
                  state.wait_seconds);
    }
    // Running: the engine's own deadlines end it.
    state.changed.wait(lock, [&] { return unit->finished; });
  }
  if (unit->result == ncclSuccess) return ncclSuccess;
  return fail(unit->result, "%s", unit->message.c_str());
}

bool StreamProxy::cancelled(const std::shared_ptr<Unit>& unit) {
  std::lock_guard<std::mutex> lock(unit->state->mutex);
  return unit->cancelled;
}

ncclResult_t StreamProxy::run_in_order(Work work, bool* cancelled) {
  std::shared_ptr<Unit> unit;
  uint32_t sequence = 0;
  TERSE_CHECK(enqueue(std::move(work), /*ready=*/true, &unit, &sequence));
  const ncclResult_t result = wait(unit);
  if (cancelled != nullptr) *cancelled = StreamProxy::cancelled(unit);
  return result;
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
  name_this_thread("terse-proxy");
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
    if (unit->cancelled) {
      // Its waiter gave up on it: skip it, but keep the sequence moving for the streams.
      unit->work = nullptr;
      publish(state.flag, unit->sequence);
      continue;
    }
    unit->started = true;
    lock.unlock();
    clear_last_error();
    // No exception may end this thread: the queue behind it would never move.
    std::string message;
    const ncclResult_t result = call_guarded(
        "the stream proxy", [&] { return unit->work(); }, &message);
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
