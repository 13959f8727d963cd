// Which memory the ranks' buffers use (-B), and which GPU each rank drives with device buffers.
//
// The default is device memory when this build has CUDA and a GPU is present, host memory
// otherwise: nccl-tests only measures device buffers, so on a GPU machine these binaries' tables
// then compare with NCCL's as they stand. TERSE_PERF_BUFFERS=host|device|managed sets the
// default for a job (the host-memory tests pin it, so that they test the same on a GPU machine);
// -B wins over both.
#pragma once

#include <string>

#include "perf/nccl_tests/options.h"

namespace terse {
namespace perf {

// Replaces kAuto by what it means here; false with a sentence naming the flag (or the variable)
// when device or managed memory was asked for and cannot be had (a build without CUDA, no GPU).
bool resolve_buffer_memory(BufferMemory* memory, std::string* error);

// The GPU of rank thread `slot` of a process that is the `local_rank`-th on its host, with
// `threads` ranks each: NCCL_TESTS_DEVICE + slot when that is set (as nccl-tests; every process
// on that GPU with -t 1), else (local_rank * threads + slot) modulo the GPUs present, so that
// with one GPU every rank shares GPU 0 (terse's engine lets ranks share one; NCCL does not).
// False with a sentence when NCCL_TESTS_DEVICE names a GPU that is not there.
bool rank_device(int local_rank, int threads, int slot, int* device, std::string* error);

}  // namespace perf
}  // namespace terse
