// Fuzz target: the dgc decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: the sparse message with fp32 values whatever the dtype (param1 must say fp32).
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("dgc", data, size);
}
