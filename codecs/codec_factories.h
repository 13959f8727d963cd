// Factory functions of every codec, one per family file; codec_registry.cpp lists them.
#pragma once

#include <memory>

#include "codecs/codec.h"
#include "codecs/codec_params.h"

namespace terse {

// Each family adds its declarations here, e.g.
// ncclResult_t create_int8_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

}  // namespace terse
