// Fuzz target: the randomk decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: the sparse message with implicit indices (regenerated from header.seed, one per
// stratum) or explicit ones that must lie in their stratum, and the stratum-scaled flag.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("randomk", data, size);
}
