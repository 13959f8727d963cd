// Fuzz target: the threshold decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: the sparse message with a data-dependent k (anything from 0 to count), explicit
// indices and values in the input's type.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("threshold", data, size);
}
