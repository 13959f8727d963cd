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

// Blockwise integer quantizers (int_quant_codecs.cpp).
ncclResult_t create_int8_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_int4_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_int2_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

// Sparsifiers (topk_codec.cpp, randomk_codec.cpp, threshold_codec.cpp, dgc_codec.cpp).
ncclResult_t create_topk_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_randomk_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_threshold_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_dgc_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

// Low-rank (powersgd_codec.cpp).
ncclResult_t create_powersgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

// Low-bit quantizers with one scale per block (qsgd_codec.cpp, terngrad_codec.cpp,
// sign_codec.cpp).
ncclResult_t create_qsgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_terngrad_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_sign_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

// Block-scaled low-precision formats (block_scaled_codecs.cpp).
ncclResult_t create_mxfp8_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_mxfp4_codec(CodecParams& params, std::unique_ptr<Codec>* codec);
ncclResult_t create_nvfp4_codec(CodecParams& params, std::unique_ptr<Codec>* codec);

}  // namespace terse
