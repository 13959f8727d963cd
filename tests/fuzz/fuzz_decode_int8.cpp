// Fuzz target: the int8 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: block size (param0), mode flags and per-block fp32 scales and minimums that must be
// finite and keep every code within fp32's range; planar 8-bit codes per block.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("int8", data, size);
}
