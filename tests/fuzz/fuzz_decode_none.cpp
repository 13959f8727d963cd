// Fuzz target: the none decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: the input's own type right after the header: only the length and the dtype byte
// decide what is read, plus the non-finite escape section every codec may carry.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("none", data, size);
}
