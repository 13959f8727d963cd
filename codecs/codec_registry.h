// Codecs by name. One table lists every codec with its wire id, family and parameters; the
// policy, the perf binaries and `--help` texts all read it, so a codec is added in one place.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/codec_params.h"

namespace terse {

struct CodecInfo {
  const char* name;  // as written in TERSE_CODEC and policy files
  CodecId id;
  CodecFamily family;
  const char* description;  // one line for --help
  const char* parameters;   // "block=256 (2..65536), rounding=nearest|stochastic"
  // Builds the codec from user parameters; must call params.finish() before succeeding.
  ncclResult_t (*create)(CodecParams& params, std::unique_ptr<Codec>* codec);
};

// Every codec, in a stable order.
const std::vector<CodecInfo>& codec_table();

// The entry for `name`, or null.
const CodecInfo* find_codec(const std::string& name);

// Builds a codec from "name" or "name:k=v,...". Unknown names and parameters are refused with a
// message that lists what is known.
ncclResult_t create_codec(const std::string& spec, std::unique_ptr<Codec>* codec);

// Builds a codec from a name and already-parsed parameters (policy files).
ncclResult_t create_codec(const std::string& name, CodecParams& params,
                          std::unique_ptr<Codec>* codec);

}  // namespace terse
