// The body of every decoder fuzz target (fuzz_decode_<codec>.cpp): one registered codec's
// decode, and read_header, fed arbitrary bytes as the wire message (input layout:
// decoder_input.h). A decoder must refuse whatever it cannot decode with ncclInvalidArgument and
// a reason; it must never read outside the message, write outside the output, hit undefined
// behaviour, or leave a partly decoded output behind when it refuses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace terse::fuzz {

// Decodes `data` as decoder_input.h describes with the codec registered as `codec_name`
// (always the same name within one process). Returns libFuzzer's verdict: 0, or -1 for an
// input too short to hold the prefix (not worth keeping in the corpus). Aborts, for libFuzzer
// to record, when a promise above is broken in a way the sanitizers cannot see.
int fuzz_decoder(const char* codec_name, const uint8_t* data, size_t size);

}  // namespace terse::fuzz
