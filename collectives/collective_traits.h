// What each kind of collective is, as the communicator checks and runs it: point to point or not,
// rooted or not, how many count-sized blocks its largest buffer holds, which buffers a rank uses.
#pragma once

#include <cstddef>

#include "collectives/collective_args.h"

namespace terse {

bool is_point_to_point(CollectiveKind kind);

bool has_root(CollectiveKind kind);

// How many count-sized blocks the largest buffer of the call holds (on some rank).
size_t blocks_per_buffer(CollectiveKind kind, int nranks);

// Which buffers this rank reads or writes (NCCL ignores sendbuff off the root of a broadcast
// or scatter and recvbuff off the root of a reduce or gather).
void buffers_used(const CollectiveArgs& args, int rank, bool* send, bool* recv);

}  // namespace terse
