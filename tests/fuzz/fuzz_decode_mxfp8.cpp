// Fuzz target: the mxfp8 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: an E8M0 scale byte per 32 elements then one E4M3 or E5M2 code per element (flags bit 0:
// E5M2); scales above 2^(127 - emax), NaN scales and NaN/Inf element codes are refused; the length
// must match the count exactly, and the escape section (kWireEscapesFlag) is parsed from the
// message's end.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("mxfp8", data, size);
}
