// Fuzz target: the powersgd decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: low-rank factors P and Q with rank (param0) and rows (seed) from the header, whose
// product sizes must not overflow, or a dense fallback payload (kDenseFlag); NaN/Inf factors
// are refused.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("powersgd", data, size);
}
