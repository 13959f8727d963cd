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
