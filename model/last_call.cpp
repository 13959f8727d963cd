#include "model/last_call.h"

#include "codecs/codec_registry.h"
#include "collectives/compressed/memory/memory_kind.h"

namespace terse {
namespace model {

std::unique_ptr<CompressedModel> model_of_last_call(const terseStats& stats, int nranks) {
  std::unique_ptr<Codec> codec;
  if (create_codec(stats.last_codec, &codec) != ncclSuccess) return nullptr;
  return std::make_unique<CompressedModel>(stats.last_codec, nranks, default_memory_kind(*codec));
}

CallSpec spec_of_last_call(const terseStats& stats, DType dtype, size_t count,
                           double result_scale) {
  CallSpec spec;
  spec.algorithm = stats.last_algorithm;
  spec.inner_algorithm = stats.last_inner_algorithm;
  spec.dtype = dtype;
  spec.count = count;
  spec.seed = stats.last_seed;
  spec.step = stats.last_step;
  spec.piece_bytes = stats.last_piece_bytes;
  spec.result_scale = result_scale;
  return spec;
}

}  // namespace model
}  // namespace terse
