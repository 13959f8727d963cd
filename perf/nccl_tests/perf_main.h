// The whole of a perf binary: parse the flags, find out how the process was launched, create
// this process's ranks (one thread each), print the header and the devices, run the rows, print
// the footer, and exit with nccl-tests' code (0, or 7 when any element was wrong; 1 for a bad
// command line, 2 when the buffers cannot be allocated, 3 for a failed NCCL call, 4 for -T).
#pragma once

#include "perf/nccl_tests/collective.h"

namespace terse {
namespace perf {

int run_perf(int argc, char** argv, const CollectiveTest& test);

}  // namespace perf
}  // namespace terse
