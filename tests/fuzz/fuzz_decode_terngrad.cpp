// Fuzz target: the terngrad decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: per-block scales (finite, non-negative) and 2-bit sign-magnitude codes packed
// across the message (bit_packing.h), with a partial last block.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("terngrad", data, size);
}
