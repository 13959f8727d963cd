// Fuzz target: the sign decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: per-block mean-magnitude scales and one bit per element packed across the message,
// with a partial last block and a partial last byte.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("sign", data, size);
}
