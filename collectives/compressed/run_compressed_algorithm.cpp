#include "collectives/compressed/run_compressed_algorithm.h"

namespace terse {

ncclResult_t run_compressed_algorithm(const CompressedAlgorithmInfo& algorithm,
                                      const CompressedArgs& args,
                                      const CompressedContext& context) {
  return algorithm.run(args, context);
}

}  // namespace terse
