#include "codecs/codec_registry.h"

#include "codecs/codec_factories.h"
#include "common/result.h"

namespace terse {

const std::vector<CodecInfo>& codec_table() {
  static const std::vector<CodecInfo> table = {
      {"none", CodecId::kNone, CodecFamily::kDense, "uncompressed: the input's own type", "",
       create_none_codec},
      {"fp16", CodecId::kFp16, CodecFamily::kDense, "cast to IEEE half, round to nearest even", "",
       create_fp16_codec},
      {"bf16", CodecId::kBf16, CodecFamily::kDense, "cast to bfloat16, round to nearest even", "",
       create_bf16_codec},
      {"int8", CodecId::kInt8, CodecFamily::kDense,
       "8-bit blockwise quantizer: per-block fp32 scale (and minimum)",
       "block=256 (8..65536, multiple of 8), mode=minmax|absmax, rounding=nearest|stochastic",
       create_int8_codec},
      {"int4", CodecId::kInt4, CodecFamily::kDense,
       "4-bit blockwise quantizer: per-block fp32 scale (and minimum)",
       "block=256 (8..65536, multiple of 8), mode=minmax|absmax, rounding=nearest|stochastic",
       create_int4_codec},
      {"int2", CodecId::kInt2, CodecFamily::kDense,
       "2-bit blockwise quantizer: per-block fp32 scale (and minimum); absmax is ternary",
       "block=256 (8..65536, multiple of 8), mode=minmax|absmax, rounding=nearest|stochastic",
       create_int2_codec},
      {"topk", CodecId::kTopK, CodecFamily::kSparse,
       "Top-K: the k largest magnitudes as (index, value) pairs",
       "ratio=0.01 (0..1] | k (1..2^32-1), method=sampled|exact", create_topk_codec},
      {"randomk", CodecId::kRandomK, CodecFamily::kSparse,
       "Random-K: one random element per stratum; shared seed sends no indices",
       "ratio=0.01 (0..1], shared_seed=true|false, unbiased=true|false", create_randomk_codec},
      {"threshold", CodecId::kThreshold, CodecFamily::kSparse,
       "every element with |x| >= threshold as (index, value) pairs", "threshold=0.001 (>= 0)",
       create_threshold_codec},
      {"dgc", CodecId::kDgc, CodecFamily::kSparse,
       "Deep Gradient Compression: top-k of momentum-corrected velocity, masking, warm-up",
       "ratio=0.001 (0..1], momentum=0.9 [0..1], clip=0 (off), warmup_steps=0, "
       "method=sampled|exact",
       create_dgc_codec},
      {"powersgd", CodecId::kPowerSgd, CodecFamily::kLowRank,
       "PowerSGD: rank-r factors P Q^T by warm-started power iteration",
       "rank=4 (1..256), iterations=1 (1..16), warm_start=true|false", create_powersgd_codec},
      {"qsgd", CodecId::kQsgd, CodecFamily::kDense,
       "QSGD: stochastic unbiased rounding to s levels of a per-block norm, sign + level codes",
       "levels=7 (1..127; 2/4/8-bit codes), block=256 (8..65536, multiple of 8), norm=max|l2",
       create_qsgd_codec},
      {"terngrad", CodecId::kTernGrad, CodecFamily::kDense,
       "TernGrad: stochastic unbiased ternary {-S, 0, S} per element, S = per-block max |x|",
       "block=256 (8..65536, multiple of 8), clip=0 (0..100; c of clipping at c*sigma, 0 off)",
       create_terngrad_codec},
      {"sign", CodecId::kSign, CodecFamily::kDense,
       "scaled sign (EF-signSGD, 1-bit Adam): 1 bit per element, per-block mean |x| scale",
       "block=256 (8..65536, multiple of 8)", create_sign_codec},
      {"mxfp8", CodecId::kMxfp8, CodecFamily::kDense,
       "OCP MX FP8: E4M3 (or E5M2) elements, a power-of-two E8M0 scale per 32",
       "elem=e4m3|e5m2, rounding=nearest|stochastic", create_mxfp8_codec},
      {"mxfp4", CodecId::kMxfp4, CodecFamily::kDense,
       "OCP MX FP4: E2M1 elements, a power-of-two E8M0 scale per 32", "rounding=nearest|stochastic",
       create_mxfp4_codec},
      {"nvfp4", CodecId::kNvfp4, CodecFamily::kDense,
       "NVFP4: E2M1 elements, an E4M3 scale per 16 and an fp32 scale per tensor",
       "rounding=nearest|stochastic", create_nvfp4_codec},
  };
  return table;
}

const CodecInfo* find_codec(const std::string& name) {
  for (const CodecInfo& info : codec_table()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

ncclResult_t create_codec(const std::string& name, CodecParams& params,
                          std::unique_ptr<Codec>* codec) {
  const CodecInfo* info = find_codec(name);
  if (info == nullptr) {
    std::string list;
    for (const CodecInfo& entry : codec_table())
      list += (list.empty() ? "" : ", ") + std::string(entry.name);
    return fail(ncclInvalidArgument, "unknown codec '%s' (known: %s)", name.c_str(), list.c_str());
  }
  return info->create(params, codec);
}

ncclResult_t create_codec(const std::string& spec, std::unique_ptr<Codec>* codec) {
  std::string name;
  CodecParams params;
  TERSE_CHECK(parse_codec_spec(spec, &name, &params));
  return create_codec(name, params, codec);
}

const char* codec_family_name(CodecFamily family) {
  switch (family) {
    case CodecFamily::kDense:
      return "dense";
    case CodecFamily::kSparse:
      return "sparse";
    case CodecFamily::kLowRank:
      return "low-rank";
  }
  return "unknown";
}

}  // namespace terse
