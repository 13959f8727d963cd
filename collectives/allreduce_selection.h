// Which dense allreduce runs a call when TERSE_ALGO does not force one (algorithm_selection.h):
// recursive doubling below kRingAllreduceMinBytes, the ring from there on. The table rows of
// both algorithms (algorithm_table.cpp) carry this boundary, so AlgorithmSelection::choose and
// select_allreduce agree.
//
// The boundary is measured (best of 3 interleaved runs, float32 sum, ranks as threads on one
// 2-core machine, UCX 1.13; TCP loopback with TERSE_UCX_ERROR_MODE=peer, shared memory with
// =none). Recursive doubling was faster at every size up to 512 KiB for 2, 3, 4 and 8 ranks on
// both wires (within noise at a few points); the ring was faster from 2 MiB on in every case,
// and at 1 MiB the two were within 20% of each other either way. In the alpha-beta model the
// ring takes 2(n-1) steps moving 2(n-1)/n of the buffer and recursive doubling log2(n) steps
// (+2 for a fold) moving the whole buffer each, so the crossover is a few alpha*beta; on this
// machine a step costs 0.1-0.5 ms (ranks share cores) against 0.2-1 GB/s, which puts it near
// 1 MiB. Machines whose ranks own their cores have a smaller alpha and likely a lower
// crossover; TERSE_ALGO=allreduce:ring or allreduce:recursive_doubling overrides.
#pragma once

#include <cstddef>

#include "collectives/algorithm_table.h"

namespace terse {

constexpr size_t kRingAllreduceMinBytes = size_t{1} << 20;

// The allreduce row for a message of `bytes` bytes (count * type size) on `nranks` ranks. The
// measured crossover did not move with the rank count (2-8), so only `bytes` decides today;
// `nranks` is there for a rank- or topology-aware rule.
const AlgorithmInfo* select_allreduce(size_t bytes, int nranks);

}  // namespace terse
