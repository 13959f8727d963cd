// ncclGroupStart / ncclGroupEnd: calls made between them are queued and run together at the
// outermost ncclGroupEnd, so that a rank can issue sends and receives in any order (a ring of
// send/recv, an alltoallv built from them) and, from one thread, drive several communicators
// whose ranks need each other.
//
// At the outermost group_end, per communicator (communicator.h, run_batch): every send and
// receive is posted, the collectives run in issue order, then the sends and receives are
// waited for. With several communicators each gets a thread of its own for the batch (the
// first runs on the caller's thread), because the ranks of one job may all be driven from this
// thread and must progress at the same time.
//
// Errors: a call whose arguments are bad returns the error at once and also fails the group:
// group_end then runs nothing and returns it. Otherwise group_end returns the first error of
// the batches, in the order the communicators first appeared. Depth and queue are per thread,
// as in NCCL.
#pragma once

#include <nccl.h>

#include "collectives/collective_args.h"

namespace terse {

class Communicator;

ncclResult_t group_start();
ncclResult_t group_end();
// How many group_start calls on this thread are still open (0 outside a group).
int group_depth();

// What every collective and send/recv entry point calls: checks the arguments against the
// communicator, then inside a group queues the call (returning ncclSuccess), outside runs it.
ncclResult_t submit(Communicator* comm, const CollectiveArgs& args);

}  // namespace terse
