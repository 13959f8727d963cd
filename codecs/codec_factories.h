// Factory functions of every codec, one per family file; codec_registry.cpp lists them.
#pragma once

#include <memory>

#include "codecs/codec.h"
#include "codecs/codec_params.h"

namespace terse {

// Casts (cast_codecs.cpp).
ncclResult_t create_none_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_fp16_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_bf16_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

}  // namespace terse
