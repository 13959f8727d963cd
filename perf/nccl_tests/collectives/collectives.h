// The seven collectives of the perf binaries, one file each.
#pragma once

#include "perf/nccl_tests/collective.h"

namespace terse {
namespace perf {

const CollectiveTest& all_reduce_test();
const CollectiveTest& all_gather_test();
const CollectiveTest& reduce_scatter_test();
const CollectiveTest& broadcast_test();
const CollectiveTest& reduce_test();
const CollectiveTest& alltoall_test();
const CollectiveTest& sendrecv_test();

}  // namespace perf
}  // namespace terse
