// Fuzz target: the topk decoder (and read_header) on arbitrary wire messages
// (decoder_fuzzer.h; input layout decoder_input.h). What its wire format gives the fuzzer to
// break: the shared sparse message (sparse_message.h): k from param0, a value type from param1,
// k strictly increasing uint32 indices below count, then k values.
#include "decoder_fuzzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return terse::fuzz::fuzz_decoder("topk", data, size);
}
