// Fuzz target: the nvfp4 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: an E4M3 scale byte per 16 elements then two E2M1 codes per byte, the fp32 tensor scale in
// param1; negative, NaN or too large scales and a nonzero padding nibble are refused; the length
// must match the count exactly, and the escape section (kWireEscapesFlag) is parsed from the
// message's end.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("nvfp4", data, size);
}
