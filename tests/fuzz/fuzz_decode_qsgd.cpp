// Fuzz target: the qsgd decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: block (param0) and levels (param1) from the header choose the code width (2, 4 or 8
// bits); sign-magnitude codes whose level must not exceed s, and per-block norms.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("qsgd", data, size);
}
