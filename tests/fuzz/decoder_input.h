// What the input of a decoder fuzz target means, shared by the targets (decoder_fuzzer.cpp) and
// the seed generator (make_seed_corpus.cpp), so seeds and targets read bytes the same way.
//
//   byte 0      variant: which of the codec's specs below decodes (modulo their number);
//               decoders read their parameters from the header, so this matters only if one
//               ever depends on its own configuration
//   byte 1      bits 0-1 dtype of the output (modulo 3), bit 2 accumulate,
//               bit 3 count from bytes 2-3 instead of from the message header
//   bytes 2-3   element count, little-endian (used when bit 3 is set, or when the header's own
//               count is above kMaxFuzzCount)
//   bytes 4-    the wire message, exactly as a peer would send it
//
// By default the decode asks for the count the header states (as a receiver that expects what
// was sent), so the fuzzer spends its time past read_header's count check, in the payload; bit 3
// lets it also try counts that disagree with the header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/dtype.h"

namespace terse::fuzz {

constexpr size_t kDecoderPrefixBytes = 4;
// Keeps every execution cheap (the output is allocated and checked per input) while covering
// many blocks of the default size 256 and partial blocks of every size up to 65536.
constexpr size_t kMaxFuzzCount = 16384;

struct DecoderPrefix {
  uint8_t variant = 0;
  DType dtype = DType::kFloat32;
  bool accumulate = false;
  bool count_from_prefix = false;
  uint16_t count = 0;
};

// Reads the prefix of an input of at least kDecoderPrefixBytes.
DecoderPrefix read_decoder_prefix(const uint8_t* data);
// The prefix bytes of `prefix`, for seeds.
std::vector<uint8_t> write_decoder_prefix(const DecoderPrefix& prefix);

// The specs a codec's target builds (byte 0 picks one), and the seed generator encodes with:
// its default spec and parameter choices that change the wire layout (block sizes, absmax,
// levels, explicit or implicit indices, ranks).
const std::vector<std::string>& decoder_variants(const std::string& codec_name);

}  // namespace terse::fuzz
