// Fuzz target: the int4 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: as int8, with 4-bit codes packed planar per block: partial last blocks and the zero
// padding bits past the last element are where packing bugs hide.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("int4", data, size);
}
