// The one call through which the engine (and the tests' harnesses) run a compressed algorithm.
// Its definition is alone in run_compressed_algorithm.cpp so that a test binary can link its own
// in its place: tests/compressed/compressed_mutation.cpp applies deliberate mistakes around the
// algorithm, to prove the suite's checks can fail. libterse.so has the plain one only.
#pragma once

#include <nccl.h>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_args.h"

namespace terse {

// algorithm.run(args, context).
ncclResult_t run_compressed_algorithm(const CompressedAlgorithmInfo& algorithm,
                                      const CompressedArgs& args, const CompressedContext& context);

}  // namespace terse
