// A codec's parameters as written by a user: "int8:block=128,rounding=stochastic" or a YAML map.
// A codec's factory reads what it knows with the typed getters; afterwards finish() refuses any
// key the codec did not ask for, so a typo never silently falls back to a default.
#pragma once

#include <nccl.h>

#include <map>
#include <string>
#include <vector>

namespace terse {

class CodecParams {
 public:
  CodecParams() = default;
  explicit CodecParams(std::string codec_name) : codec_(std::move(codec_name)) {}

  // Parses "k=v,k=v" (empty allowed). Refuses a malformed pair or a repeated key.
  static ncclResult_t parse(const std::string& codec_name, const std::string& text,
                            CodecParams* params);

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::string& codec() const { return codec_; }

  // Typed getters: `fallback` when absent; an error naming codec, key and value when the value
  // does not parse or is outside [min, max].
  ncclResult_t get_int(const std::string& key, long long fallback, long long min, long long max,
                       long long* value);
  ncclResult_t get_double(const std::string& key, double fallback, double min, double max,
                          double* value);
  ncclResult_t get_bool(const std::string& key, bool fallback, bool* value);
  ncclResult_t get_choice(const std::string& key, const std::vector<std::string>& choices,
                          const std::string& fallback, std::string* value);

  // Refuses keys no getter asked for, listing the ones the codec knows.
  ncclResult_t finish() const;

 private:
  std::string codec_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> known_;
};

// Splits "name:k=v,..." into the name and its parameters.
ncclResult_t parse_codec_spec(const std::string& spec, std::string* name, CodecParams* params);

}  // namespace terse
