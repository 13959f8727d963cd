// Fuzz target: the int2 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: as int8, with 2-bit codes packed planar per block (absmax is ternary: the unused
// stored code must still decode within the block's range).
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("int2", data, size);
}
