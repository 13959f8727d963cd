#include "decoder_input.h"

#include <map>

namespace terse::fuzz {

DecoderPrefix read_decoder_prefix(const uint8_t* data) {
  DecoderPrefix prefix;
  prefix.variant = data[0];
  prefix.dtype = static_cast<DType>((data[1] & 3u) % kDTypeCount);
  prefix.accumulate = (data[1] & 4u) != 0;
  prefix.count_from_prefix = (data[1] & 8u) != 0;
  prefix.count = static_cast<uint16_t>(data[2] | (data[3] << 8));
  return prefix;
}

std::vector<uint8_t> write_decoder_prefix(const DecoderPrefix& prefix) {
  uint8_t flags =
      static_cast<uint8_t>(static_cast<unsigned>(prefix.dtype) | (prefix.accumulate ? 4u : 0u) |
                           (prefix.count_from_prefix ? 8u : 0u));
  return {prefix.variant, flags, static_cast<uint8_t>(prefix.count & 0xff),
          static_cast<uint8_t>(prefix.count >> 8)};
}

const std::vector<std::string>& decoder_variants(const std::string& codec_name) {
  static const std::map<std::string, std::vector<std::string>> variants = {
      {"none", {"none"}},
      {"fp16", {"fp16"}},
      {"bf16", {"bf16"}},
      {"int8", {"int8", "int8:block=8,mode=absmax", "int8:block=64,rounding=stochastic"}},
      {"int4", {"int4", "int4:block=8,mode=absmax", "int4:block=64,rounding=stochastic"}},
      {"int2", {"int2", "int2:block=8,mode=absmax", "int2:block=64,rounding=stochastic"}},
      {"qsgd", {"qsgd", "qsgd:levels=1,block=8", "qsgd:levels=127,norm=l2,block=64"}},
      {"terngrad", {"terngrad", "terngrad:block=8,clip=2.5"}},
      {"sign", {"sign", "sign:block=8"}},
      {"topk", {"topk:ratio=0.1", "topk:k=5,method=exact", "topk:ratio=1"}},
      {"randomk",
       {"randomk:ratio=0.1", "randomk:ratio=0.25,shared_seed=false",
        "randomk:ratio=0.5,unbiased=false"}},
      {"threshold", {"threshold:threshold=0.5", "threshold:threshold=0"}},
      {"dgc", {"dgc:ratio=0.1", "dgc:ratio=0.05,momentum=0.5,clip=1,method=exact"}},
      {"powersgd", {"powersgd:rank=1", "powersgd:rank=4,iterations=2,warm_start=false"}},
      {"mxfp8", {"mxfp8", "mxfp8:elem=e5m2,rounding=stochastic"}},
      {"mxfp4", {"mxfp4", "mxfp4:rounding=stochastic"}},
      {"nvfp4", {"nvfp4", "nvfp4:rounding=stochastic"}},
  };
  auto found = variants.find(codec_name);
  if (found != variants.end()) return found->second;
  // A codec added to the registry without variants here: its name alone (its defaults).
  static std::map<std::string, std::vector<std::string>> by_name;
  auto [entry, inserted] = by_name.emplace(codec_name, std::vector<std::string>{codec_name});
  (void)inserted;
  return entry->second;
}

}  // namespace terse::fuzz
