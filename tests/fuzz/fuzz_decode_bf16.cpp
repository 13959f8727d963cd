// Fuzz target: the bf16 decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: count bfloat16 values after the header; the length must match the count exactly, and
// the escape section (kWireEscapesFlag) is parsed from the message's end.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("bf16", data, size);
}
