// Where an accepted collective or send/recv call goes, and the API-level group queue.
//
// - Host buffers on a communicator without staging: the engine, at once (outside a group) or
//   through the engine's group at ncclGroupEnd, exactly as before device buffers existed.
// - Device buffers: the communicator's DeviceStaging (device_staging.h), created at its first
//   device call; the call returns once its copies are enqueued on the stream. A lone allreduce
//   the engine expects to compress with an algorithm and codec the device backend runs goes to
//   the backend instead (backend_route.h: only encoded messages are copied); inside a group
//   every call is staged.
// - Any call on a communicator that has staging: through its stream proxy, so that the engine
//   sees that communicator's operations in issue order on every rank. Host-buffer calls are
//   waited for (they complete before returning, as always); count-0 calls are queued and not
//   waited for (they touch no memory, and waiting would block on the stream).
//
// Groups are kept here, not in the engine, because whether a communicator's calls are staged
// is known only once all of them are: at the outermost ncclGroupEnd, for every communicator
// with staging, every batch's inputs are staged first, then every stream's outputs (so that
// communicators sharing a stream, driven from one thread, never wait for each other's inputs);
// then the host-only communicators run through the engine's group (collectives/group.h); then
// the batches holding host-buffer calls are waited for. A call refused inside a group fails
// the group, which then runs nothing.
#pragma once

#include <nccl.h>

#include <functional>

#include "collectives/compressed/compression_engine.h"
#include "plugin/device_staging.h"

struct ncclComm;

namespace terse {

// Runs or, inside a group, queues `call` on `comm` (arguments checked by the caller).
ncclResult_t route_call(ncclComm* comm, const QueuedCall& call);

// ncclGroupStart's part: one more level of group on this thread.
void begin_api_group();
// ncclGroupEnd's part: one level less; at the outermost level runs every queued call and
// returns the first error. Fails with ncclInvalidUsage when no group is open.
// `hand_offs_ran`: the real NCCL's group ended without error (wrap mode; true in engine mode),
// so the calls handed to it in the group ran and count as their tensors' steps
// (CompressionEngine::commit) before terse's calls run; otherwise they are dropped.
ncclResult_t end_api_group(bool hand_offs_ran);
// ncclGroupSimulateEnd's part: one level less; at the outermost level the queued calls are
// discarded, not run: no message, no buffer, no stream, no operation number, no tensor step
// (every rank simulates its group alike, so the ranks stay in step). *seconds is the sum of the
// engine's predictions for them (Communicator::simulate, each communicator's calls in issue
// order, as a run would plan them: after the group's hand-offs and its earlier calls, in steps
// the group keeps to itself), *simulated how many there were (0 at an inner level). The
// group's hand-offs are dropped uncounted. A group a refused call failed returns that failure,
// as end_api_group does.
ncclResult_t simulate_api_group(double* seconds, size_t* simulated);
// The outermost level closed with nothing of it run or counted (a simulated end NCCL refuses:
// a simInfo without NCCL_SIM_INFO_INITIALIZER's magic). Returns the failure of a call the group
// refused, which NCCL reports first.
ncclResult_t discard_api_group();
// Group levels open on this thread (0 outside a group).
int api_group_depth();
// Wrap mode: the steps the open group's hand-offs to the real NCCL take on `comm`
// (CompressionEngine::count_hand_off), made at its first; the outermost end_api_group commits
// them, simulate_api_group and discard_api_group drop them. Keeps a use of `comm` until then:
// fails only when `comm` is being destroyed or aborted, before anything was handed off.
ncclResult_t group_steps(ncclComm* comm, CompressionEngine::PendingSteps** steps);
// A call inside the open group was refused (`result`, with this thread's last error): the
// group will run nothing. No effect outside a group.
void refuse_in_group(ncclResult_t result);

// Runs `work` (a communicator-wide engine call: split, finalize) after every call already made
// on `comm`: through its stream proxy when it has staging, else at once.
ncclResult_t run_in_call_order(ncclComm* comm, const std::function<ncclResult_t()>& work);

}  // namespace terse
